"""Pydantic 2 models for chatd's generator fixtures.

Run by ../regen.sh; prints {"<model>": <model_json_schema()>, ...} as JSON.
The same models are written in zod 4, zod 3 (zod-to-json-schema) and Go
(invopop/jsonschema) beside this file.
"""
import json
import sys
from datetime import datetime
from enum import Enum
from typing import Annotated, Dict, List, Literal, Optional, Union
from uuid import UUID

import pydantic
from pydantic import BaseModel, Field


class Status(str, Enum):
    pending = "pending"
    paid = "paid"
    shipped = "shipped"


class Address(BaseModel):
    street: str
    city: str
    country: str = Field(pattern=r"^[A-Z]{2}$", description="ISO 3166-1 alpha-2")


class Customer(BaseModel):
    name: str = Field(min_length=1)
    email: str
    address: Optional[Address] = None


class Line(BaseModel):
    sku: str
    quantity: int = Field(ge=1)
    unit_price: float = Field(ge=0)


class Order(BaseModel):
    id: UUID
    status: Status
    customer: Customer
    lines: List[Line] = Field(min_length=1)
    note: Optional[str] = None
    metadata: Dict[str, str] = {}
    created_at: datetime


class Point(BaseModel):
    x: float
    y: float


class Circle(BaseModel):
    kind: Literal["circle"]
    radius: float = Field(gt=0)


class Rect(BaseModel):
    kind: Literal["rect"]
    width: float = Field(gt=0)
    height: float = Field(gt=0)


class Polygon(BaseModel):
    kind: Literal["polygon"]
    points: List[Point] = Field(min_length=3)


class Drawing(BaseModel):
    name: str
    shapes: List[Annotated[Union[Circle, Rect, Polygon], Field(discriminator="kind")]]


class Category(BaseModel):
    name: str
    children: List["Category"] = []


if __name__ == "__main__":
    out = {
        "generator": "pydantic " + pydantic.VERSION,
        "schemas": {
            "order": Order.model_json_schema(),
            "drawing": Drawing.model_json_schema(),
            "category": Category.model_json_schema(),
        },
    }
    json.dump(out, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
