// The fixture models in zod (the same file runs under zod 3 and zod 4).
// named gives a schema an identifier (zod 4's .meta({id}), which makes
// toJSONSchema emit it once under $defs; zod 3 has none).
export function models(z, named = (s) => s) {
  const Address = z.object({
    street: z.string(),
    city: z.string(),
    country: z.string().regex(/^[A-Z]{2}$/).describe("ISO 3166-1 alpha-2"),
  });
  const Customer = named(z.object({
    name: z.string().min(1),
    email: z.string(),
    address: named(Address, "Address").nullable().optional(),
  }), "Customer");
  const Line = named(z.object({
    sku: z.string(),
    quantity: z.number().int().min(1),
    unit_price: z.number().min(0),
  }), "Line");
  const Order = z.object({
    id: z.string().uuid(),
    status: z.enum(["pending", "paid", "shipped"]),
    customer: Customer,
    lines: z.array(Line).min(1),
    note: z.string().nullable().optional(),
    metadata: z.record(z.string(), z.string()).optional(),
    created_at: z.string().datetime(),
  });
  const Point = named(z.object({ x: z.number(), y: z.number() }), "Point");
  const Shape = z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("circle"), radius: z.number().positive() }),
    z.object({ kind: z.literal("rect"), width: z.number().positive(), height: z.number().positive() }),
    z.object({ kind: z.literal("polygon"), points: z.array(Point).min(3) }),
  ]);
  const Drawing = z.object({ name: z.string(), shapes: z.array(Shape) });
  const Category = z.lazy(() => z.object({ name: z.string(), children: z.array(Category).optional() }));
  return { order: Order, drawing: Drawing, category: Category };
}
