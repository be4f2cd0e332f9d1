"""Identity: scoped tokens, the token API, JWTs of the app's identity provider, a backend acting for a user."""

from __future__ import annotations

import os
import time
import uuid
from datetime import timedelta

import pytest

import chatd
from chatd import types as t

from .conftest import SignedIn


def unique(name: str) -> str:
    """A user name of this run's own (the suite shares one chatd)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_a_read_token_cannot_write(admin: chatd.Client, base_url: str) -> None:
    made = admin.create_token(unique("py-reader"), scopes=["read"])
    with chatd.Client(base_url, made.secret) as reader:
        assert reader.list_chats().chats == []
        with pytest.raises(chatd.PermissionDeniedError) as info:
            reader.create_chat("A read token may not write.")
    err = info.value
    assert err.status == 403 and err.required_scope == "write"
    assert "needs the write scope" in err.message, err.message


def test_the_token_api_round_trip(admin: chatd.Client, base_url: str) -> None:
    user = unique("py-user")
    made = admin.create_token(user, scopes=["read", "write"], expires_in=timedelta(hours=1))
    assert made.secret.startswith("chatd_")
    assert made.token.user == user and made.token.scopes == ["read", "write"] and not made.token.act_as
    assert made.token.expires_at is not None and not made.token.expired
    listed = admin.list_tokens(user=user)
    assert [tk.id for tk in listed.tokens] == [made.token.id]
    assert made.secret not in listed.model_dump_json(), "the secret is shown once, at creation"
    assert any(u.name == user and u.subject is None for u in admin.iter_users(page_size=2))
    with chatd.Client(base_url, made.secret) as c:
        c.list_chats()
        assert admin.revoke_token(made.token.id) is None
        with pytest.raises(chatd.AuthenticationError):
            c.list_chats()
    assert admin.list_tokens(user=user).tokens == []


def test_jwt_users_see_only_their_chats(base_url: str, user_a: SignedIn, user_b: SignedIn) -> None:
    fetched = 0

    def sign_in() -> str:
        nonlocal fetched
        fetched += 1
        return user_a.jwt

    with chatd.Client(base_url, chatd.jwt_source(sign_in)) as a, chatd.Client(base_url, user_b.jwt) as b:
        chat = a.create_chat("Signed in with the identity provider's ID token.")
        assert chat.text()  # followed on her stream
        assert str(a.get_chat(chat.chat_id).id) == chat.chat_id
        with pytest.raises(chatd.NotFoundError):
            b.get_chat(chat.chat_id)  # two users of the app: two chatd users
        assert chat.chat_id not in {str(ch.id) for ch in b.iter_chats()}
    assert fetched == 1, "the ID token, valid for an hour, is fetched once"


def test_jwt_source_fetches_again_within_its_margin(base_url: str, user_a: SignedIn) -> None:
    fetched = 0

    def sign_in() -> str:
        nonlocal fetched
        fetched += 1
        return user_a.jwt

    # The ID token expires in an hour: with a two-hour margin it is always due.
    with chatd.Client(base_url, chatd.jwt_source(sign_in, refresh_before=7200)) as a:
        a.list_chats()
        a.list_chats()
    assert fetched == 2


def test_act_as_sees_exactly_that_users_chats(
    admin: chatd.Client, base_url: str, user_a: SignedIn, user_b: SignedIn
) -> None:
    with chatd.Client(base_url, user_a.jwt) as a, chatd.Client(base_url, user_b.jwt) as b:
        a.create_chat("Alice's.")
        his = b.create_chat("Bob's.").chat_id
        hers = {str(ch.id) for ch in a.iter_chats()}
        theirs = {str(ch.id) for ch in b.iter_chats()}
        assert [u for u in admin.iter_users() if u.subject == user_a.subject][0].name.startswith("idp:")
        secret = admin.create_token(unique("py-backend"), act_as=True).secret
        with chatd.Client(base_url, secret, act_as=user_a.subject) as backend:
            assert {str(ch.id) for ch in backend.iter_chats()} == hers
            with pytest.raises(chatd.NotFoundError):
                backend.get_chat(his)
            made = backend.create_chat("Made for Alice by her app's backend.")
            assert made.text()
            assert str(a.get_chat(made.chat_id).id) == made.chat_id
            as_bob = backend.act_as(user_b.subject)
            assert {str(ch.id) for ch in as_bob.iter_chats()} == theirs
            as_bob.close()
            assert backend.list_chats().chats, "closing the copy leaves the connections open"
    with chatd.Client(base_url, os.environ["CHATD_TOKEN"], act_as=user_a.subject) as plain:
        with pytest.raises(chatd.PermissionDeniedError) as info:
            plain.list_chats()
    assert info.value.required_scope is None and "act-as" in info.value.message


def test_a_stream_whose_token_is_revoked_goes_on_with_a_fresh_one(admin: chatd.Client, base_url: str) -> None:
    user = unique("py-dave")
    secrets = [admin.create_token(user).secret]
    with chatd.Client(base_url, secrets[0]) as c:
        chat = c.create_chat("Followed past its token's revocation.").chat_id
    first = admin.list_tokens(user=user).tokens[0].id
    asked = 0

    def current() -> str:
        nonlocal asked
        asked += 1
        return secrets[-1]

    reconnects: list[chatd.ReconnectInfo] = []
    revoked = ended = False
    with chatd.Client(base_url, current) as c, c.stream(chat, on_reconnect=reconnects.append) as events:
        events.deadline = time.monotonic() + 60  # WaitTimeout rather than a hang
        for ev in events:
            if isinstance(ev, t.StreamStatusEvent) and not revoked:
                revoked = True
                secrets.append(admin.create_token(user).secret)
                admin.revoke_token(first)  # every server ends its streams within 5 s
            elif isinstance(ev, t.StreamErrorEvent):
                assert "revoked or has expired" in ev.data.message and not reconnects
                ended = True
            elif ended and isinstance(ev, t.StreamStatusEvent):
                break  # the reconnected stream's catch-up
    assert asked == 2 and len(reconnects) == 1, (asked, reconnects)


@pytest.mark.anyio
async def test_async_token_api_and_act_as(base_url: str, user_b: SignedIn) -> None:
    async with chatd.AsyncClient(base_url, os.environ["CHATD_ADMIN_TOKEN"]) as admin:
        made = await admin.create_token(unique("py-async-backend"), act_as=True, scopes=["read"], expires_in=60)
        assert [tk.id for tk in (await admin.list_tokens(user=made.token.user)).tokens] == [made.token.id]
        assert [u async for u in admin.iter_users() if u.name == made.token.user]

        async def sign_in() -> str:
            return user_b.jwt

        async with chatd.AsyncClient(base_url, chatd.async_jwt_source(sign_in)) as b:
            chat = await b.create_chat("Bob's, asynchronously.")
            his = {str(ch.id) for ch in (await b.list_chats()).chats}
        assert chat.chat_id in his
        async with chatd.AsyncClient(base_url, made.secret) as backend:
            as_bob = backend.act_as(user_b.subject)
            assert {str(ch.id) for ch in (await as_bob.list_chats()).chats} == his
            with pytest.raises(chatd.PermissionDeniedError) as info:
                await as_bob.create_chat("A read token acting for Bob may not write.")
            assert info.value.required_scope == "write"
            await admin.revoke_token(made.token.id)
            with pytest.raises(chatd.AuthenticationError):
                await as_bob.list_chats()
