"""Bearer tokens: listed, revoked and expiring; refused on every replica within the cache TTL.

The cache in front of the store (:class:`carbonsched.service.tokens.TokenCache`) is driven by an
injected clock; the store on SQLite and PostgreSQL; the CLI as a subprocess; the API and the
revocation across replicas through two real `carbonsched serve` processes on one store.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from carbonsched.errors import InputError
from carbonsched.service.tokens import TokenCache, parse_lifetime, token_public
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore
from tests.service.conftest import AS_OF, CATALOG, cli, copy_db

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
ADMIN = "tokens-test-bootstrap-admin-5e1f"


class Mono:
    """A monotonic clock the test moves. [s]"""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


# --- the cache ------------------------------------------------------------------------------------

def test_refused_tokens_are_kept_lru_at_the_stated_bound():
    c = TokenCache(ttl_s=60, max_entries=3, monotonic=Mono())
    for h in ("a", "b", "c"):
        c.put_invalid(h)
    assert c.sizes() == (0, 3)                       # at the bound: all kept
    assert c.get("a") == (True, None)                # "a" is now the most recently used
    c.put_invalid("d")
    assert c.sizes() == (0, 3)                       # one past the bound: one dropped ...
    assert c.get("b") == (False, None)               # ... the least recently used
    assert [c.get(h) for h in ("a", "c", "d")] == [(True, None)] * 3
    for i in range(10_000):                          # a flood of random tokens stays bounded
        c.put_invalid(f"flood-{i}")
    assert c.sizes() == (0, 3)


def test_valid_tokens_are_bounded_too_and_never_evict_refusals():
    c = TokenCache(ttl_s=60, max_entries=2, monotonic=Mono())
    c.put_invalid("x")
    for h in ("v1", "v2", "v3"):
        c.put_valid(h, "read", f"id-{h}")
    assert c.sizes() == (2, 1)
    assert c.get("v1") == (False, None) and c.get("v3") == (True, "read")
    assert c.get("x") == (True, None)


def test_a_verdict_lives_ttl_seconds_and_never_past_the_tokens_expiry():
    mono = Mono()
    c = TokenCache(ttl_s=5, max_entries=10, monotonic=mono)
    c.put_valid("v", "submit", "id-v")
    c.put_valid("soon", "admin", "id-soon", valid_for_s=2)   # expires in 2 s
    c.put_invalid("bad")
    mono.t += 2 - 1e-6
    assert [c.get(h) for h in ("v", "soon", "bad")] == [(True, "submit"), (True, "admin"),
                                                         (True, None)]
    mono.t += 1e-6                                           # exactly at the token's expiry
    assert c.get("soon") == (False, None) and c.get("v") == (True, "submit")
    mono.t += 3                                              # exactly ttl_s after
    assert c.get("v") == (False, None) and c.get("bad") == (False, None)
    c.put_valid("gone", "read", "id-gone", valid_for_s=-1)   # expired already: not reused
    assert c.get("gone") == (False, None)


def test_forgetting_a_revoked_token_id():
    c = TokenCache(ttl_s=60, max_entries=10, monotonic=Mono())
    c.put_valid("h1", "admin", "id-1")
    c.put_valid("h2", "admin", "id-2")
    c.forget_token_id("id-1")
    assert c.get("h1") == (False, None) and c.get("h2") == (True, "admin")


def test_cache_size_below_one_is_refused():
    with pytest.raises(InputError, match="token cache size 0 must be >= 1"):
        TokenCache(ttl_s=1, max_entries=0)


@pytest.mark.parametrize(("text", "seconds"), [("90d", 90 * 86400), ("12h", 43200),
                                               ("1.5m", 90), ("1s", 1), ("2w", 14 * 86400)])
def test_lifetimes(text, seconds):
    assert parse_lifetime(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "0d", "90", "d", "-1h", "1y", "1 day"])
def test_bad_lifetimes_say_the_form(text):
    with pytest.raises(InputError, match="is not a positive <number><unit>; give e.g. 90d"):
        parse_lifetime(text)


# --- the store ----------------------------------------------------------------------------------

@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> ServiceStore:
    if request.param == "sqlite":
        return ServiceStore(Store(f"sqlite:///{tmp_path / 't.sqlite'}"))
    return ServiceStore(Store(request.getfixturevalue("pg_db")))


def test_expiry_is_exclusive_a_token_expiring_exactly_now_is_refused(db):
    exp = NOW + timedelta(hours=1)
    tid, token = db.create_token("submit", NOW, "ci", expires_at=exp)
    just_before = exp - timedelta(microseconds=1)
    assert db.token_record(token, just_before) == {"token_id": tid, "role": "submit",
                                                   "expires_at": exp}
    assert db.token_record(token, exp) is None                     # expiring exactly now
    assert db.token_record(token, exp + timedelta(seconds=1)) is None
    [row] = db.tokens()
    assert token_public(row, just_before)["active"] and not token_public(row, exp)["active"]


@pytest.mark.parametrize(("expires", "message"), [
    (NOW, "is not after now"),                                      # at the limit: refused
    (NOW - timedelta(days=1), "is not after now"),
    (datetime(2026, 6, 1), "has no time zone"),
])
def test_an_expiry_not_in_the_future_is_refused(db, expires, message):
    with pytest.raises(InputError, match=message):
        db.create_token("read", NOW, expires_at=expires)
    assert db.tokens() == []


def test_list_and_revoke(db):
    t1, tok1 = db.create_token("admin", NOW, "ops")
    t2, tok2 = db.create_token("read", NOW + timedelta(seconds=1), "dash",
                               expires_at=NOW + timedelta(days=30))
    rows = db.tokens()
    assert [(r["token_id"], r["role"], r["name"]) for r in rows] == [(t1, "admin", "ops"),
                                                                    (t2, "read", "dash")]
    assert all(tok1 not in str(r) and tok2 not in str(r) for r in rows)   # never the token
    revoked = db.revoke_token(t1, NOW + timedelta(minutes=5))
    assert revoked["revoked_at"] == NOW + timedelta(minutes=5)
    assert db.token_record(tok1, NOW + timedelta(minutes=6)) is None
    assert db.token_record(tok2, NOW + timedelta(minutes=6))["role"] == "read"
    # revoking again keeps the first revocation; an unknown id is a KeyError
    assert db.revoke_token(t1, NOW + timedelta(hours=1))["revoked_at"] == \
        NOW + timedelta(minutes=5)
    with pytest.raises(KeyError):
        db.revoke_token("0" * 16, NOW)


# --- the CLI ------------------------------------------------------------------------------------

def test_cli_create_with_expiry_list_and_revoke(tmp_path):
    env = {"CARBONSCHED_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite'}"}
    r = cli("token", "create", "--role", "read", "--name", "dash", "--expires-in", "30d",
            env=env)
    assert r.returncode == 0, r.stderr
    token = r.stdout.strip().splitlines()[-1]
    assert "(valid until 20" in r.stderr and token.startswith("cst_")
    r = cli("token", "list", "--json", env=env)
    assert r.returncode == 0, r.stderr
    import json

    [row] = json.loads(r.stdout)["data"]
    assert (row["role"], row["name"], row["active"], row["revoked_at"]) == ("read", "dash",
                                                                            True, None)
    assert token not in r.stdout
    r = cli("token", "revoke", row["token_id"], env=env)
    assert r.returncode == 0 and "revoked at" in r.stderr, r.stderr
    r = cli("token", "list", env=env)
    assert row["token_id"] in r.stdout and " no " in r.stdout
    # bad input: exit 2 with the fix named
    r = cli("token", "revoke", "feedfeedfeedfeed", env=env)
    assert r.returncode == 2 and "no token 'feedfeedfeedfeed'" in r.stderr
    r = cli("token", "create", "--role", "read", "--expires-in", "soon", env=env)
    assert r.returncode == 2 and "give e.g. 90d" in r.stderr
    r = cli("token", "create", "--role", "read", "--expires-at", "2020-01-01T00:00:00Z",
            env=env)
    assert r.returncode == 2 and "is not after now" in r.stderr


# --- the API, two replicas ----------------------------------------------------------------------

@pytest.mark.shared_data
def test_revocation_reaches_every_replica_within_the_cache_ttl(plan_db, tmp_path,
                                                               start_server):
    url = copy_db(plan_db, tmp_path / "db")
    env = {"CARBONSCHED_BOOTSTRAP_ADMIN_TOKEN": ADMIN, "CARBONSCHED_TOKEN_CACHE_S": "1"}
    args = ["--no-cron", "--as-of", AS_OF, "--catalog", CATALOG]
    a = start_server(url, *args, env=env)
    b = start_server(url, *args, env=env)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    r = httpx.post(a.url + "/v1/tokens", json={"role": "read", "name": "dash"}, headers=admin)
    assert r.status_code == 201, r.text
    made = r.json()
    h = {"Authorization": f"Bearer {made['token']}"}
    assert made["active"] and made["expires_at"] is None
    for srv in (a, b):      # both replicas now hold the token's role in their caches
        assert httpx.get(srv.url + "/v1/sites", headers=h).status_code == 200
    listed = httpx.get(b.url + "/v1/tokens", headers=admin).json()
    assert [t["token_id"] for t in listed["data"]] == [made["token_id"]]
    assert "token" not in listed["data"][0]
    r = httpx.delete(f"{a.url}/v1/tokens/{made['token_id']}", headers=admin)
    assert r.status_code == 200 and r.json()["revoked_at"] and not r.json()["active"]
    # the replica that revoked refuses at once
    assert httpx.get(a.url + "/v1/sites", headers=h).status_code == 401
    # the other one once its 1 s verdict has aged out (the deadline only bounds a hang)
    deadline = time.monotonic() + 20
    while httpx.get(b.url + "/v1/sites", headers=h).status_code != 401:
        assert time.monotonic() < deadline, "replica b still accepts the revoked token"
        time.sleep(0.1)
    # an expiring token works until its expiry, then on no replica
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    r = httpx.post(b.url + "/v1/tokens", json={"role": "read", "expires_at": soon},
                   headers=admin)
    assert r.status_code == 201, r.text
    h2 = {"Authorization": f"Bearer {r.json()['token']}"}
    assert httpx.get(a.url + "/v1/sites", headers=h2).status_code == 200
    deadline = time.monotonic() + 30
    while any(httpx.get(s.url + "/v1/sites", headers=h2).status_code != 401 for s in (a, b)):
        assert time.monotonic() < deadline, "the expired token is still accepted"
        time.sleep(0.2)
    # known-bad requests: an expiry in the past, an unknown id, a malformed id, a weak role
    past = {"role": "read", "expires_at": "2020-01-01T00:00:00Z"}
    r = httpx.post(a.url + "/v1/tokens", json=past, headers=admin)
    assert r.status_code == 422 and "is not after now" in r.text
    assert httpx.delete(a.url + "/v1/tokens/0123456789abcdef", headers=admin).status_code == 404
    assert httpx.delete(a.url + "/v1/tokens/not-an-id", headers=admin).status_code == 422
    r = httpx.post(a.url + "/v1/tokens", json={"role": "read"}, headers=admin)
    weak = {"Authorization": f"Bearer {r.json()['token']}"}
    assert httpx.get(a.url + "/v1/tokens", headers=weak).status_code == 403
    for srv in (a, b):
        assert "Traceback" not in srv.logs(), srv.logs()[-3000:]
