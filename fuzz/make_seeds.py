#!/usr/bin/env python3
"""Writes the hand-made seed inputs of every fuzz target to fuzz/seeds/<target>/.

Valid inputs signed with the targets' fixed keys (fuzz/src/lib.rs): a real ticket code
(Ed25519 seed [7; 32]), account tokens (the dev JWT secret), waiting-room tokens, a signed
Stripe webhook. Needs Python 3 with `cryptography` (for Ed25519). Run from anywhere:

    python3 fuzz/make_seeds.py
"""

import base64
import hashlib
import hmac
import json
import pathlib
import shutil

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SEEDS = pathlib.Path(__file__).resolve().parent / "seeds"
TICKET_KEY = Ed25519PrivateKey.from_private_bytes(bytes([7] * 32))
JWT_SECRET = b"boxoffice-dev-secret-do-not-use-in-production"
WAITROOM_SECRET = b"fuzz-waitroom-secret-0123456789"
WEBHOOK_SECRET = b"whsec_fuzz_0123456789"


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def compact(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def ticket_code(claims: dict) -> str:
    signed = "BO1." + b64(compact(claims))
    return signed + "." + b64(TICKET_KEY.sign(signed.encode()))


def hs256(secret: bytes, claims: dict) -> str:
    signed = b64(compact({"typ": "JWT", "alg": "HS256"})) + "." + b64(compact(claims))
    mac = hmac.new(secret, signed.encode(), hashlib.sha256).digest()
    return signed + "." + b64(mac)


def stripe_signature(timestamp: int, body: bytes) -> str:
    mac = hmac.new(WEBHOOK_SECRET, f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


SEATED = {
    "ticketId": "0193a4f2-8d00-7000-8000-000000000001",
    "eventId": "0193a4f2-7c1e-7b3a-9f0e-5d2c8b1a6e47",
    "orderId": "0193a4f2-8d00-7000-8000-000000000009",
    "seatId": "BALCONY-12-7",
    "unit": 1,
    "issuedAtUnixS": 1790000000,
}
TIER = {
    "ticketId": "0193a4f2-8d00-7000-8000-000000000002",
    "eventId": "0193a4f2-7c1e-7b3a-9f0e-5d2c8b1a6e47",
    "orderId": "0193a4f2-8d00-7000-8000-000000000009",
    "tierId": "GA",
    "unit": 2,
    "issuedAtUnixS": 1790000000,
}
EVENT = {
    "name": "Spring gala",
    "startsAt": "2026-06-01T19:00:00Z",
    "onSaleAt": "2026-05-01T10:00:00+02:00",
    "currency": "EUR",
    "holdTtlSeconds": 300,
    "maxSeatsPerHold": 6,
    "waitingRoom": {"enabled": True, "policy": "random", "maxActiveShoppers": 100},
    "sections": [{"name": "A", "rows": 10, "seatsPerRow": 20, "priceMinor": 4500}],
    "tiers": [{"tierId": "GA", "name": "Standing", "capacity": 500, "priceMinor": 3000}],
    "idempotencyKey": "k-event-1",
}
PAYMENT_INTENT = {
    "id": "evt_1",
    "type": "payment_intent.succeeded",
    "created": 1900000000,
    "data": {
        "object": {
            "object": "payment_intent",
            "id": "pi_1",
            "status": "succeeded",
            "amount": 9000,
            "currency": "eur",
            "metadata": {"operation_id": "op-1"},
        }
    },
}
FAILED_INTENT = {
    "id": "evt_2",
    "type": "payment_intent.payment_failed",
    "created": 1900000000,
    "data": {
        "object": {
            "id": "pi_2",
            "status": "requires_payment_method",
            "amount": 4500,
            "currency": "usd",
            "last_payment_error": {"code": "card_declined", "decline_code": "insufficient_funds"},
            "next_action": {"redirect_to_url": {"url": "https://example.test/3ds"}},
        }
    },
}
ROOM = {
    "queue": {"policy": "random", "onSaleAtMs": 1000, "seed": 42, "claimWindowMs": 600000},
    "maxActiveShoppers": 2,
    "admissionTtlMs": 500,
}


# docs/VENUES.md's worked example, in both forms.
HALL_CSV = b"""section,row,seat,x,y,category,kind,quality,capacity
STALLS,A,1,-30,52,A,standard,,
STALLS,A,2,-20,56,A,standard,,
STALLS,A,3,-10,58,A,aisle,,
STALLS,A,5,10,58,A,aisle,,
STALLS,A,6,20,56,A,standard,900,
STALLS,A,7,30,52,A,restricted_view,,
STALLS,B,1,-25,70,B,wheelchair,,
STALLS,B,2,-15,72,B,companion,,
STALLS,B,3,15,72,B,standard,,
BACK,,,-40,90,STAND,standing,,120
BACK,,,40,90,STAND,standing,,
BACK,,,40,120,STAND,standing,,
BACK,,,-40,120,STAND,standing,,
"""
HALL_JSON = {
    "name": "Small hall", "stage": {"x": 0, "y": 0},
    "categories": [{"key": "A", "name": "Front", "colour": "#C0392B"},
                   {"key": "B", "name": "Back"}, {"key": "STAND", "name": "Standing"}],
    "sections": [
        {"name": "STALLS", "kind": "reserved", "rows": [
            {"label": "A", "seats": [
                {"label": "1", "x": -30, "y": 52, "category": "A"},
                {"label": "3", "x": -10, "y": 58, "category": "A", "kind": "aisle"},
                {"label": "5", "x": 10, "y": 58, "category": "A", "kind": "aisle", "quality": 900}]},
            {"label": "B", "seats": [
                {"label": "1", "x": -25, "y": 70, "category": "B", "kind": "wheelchair"},
                {"label": "2", "x": -15, "y": 72, "category": "B", "kind": "companion"}]}]},
        {"name": "BACK", "kind": "standing", "capacity": 120, "category": "STAND",
         "box": {"x": -40, "y": 90, "width": 80, "height": 30}}],
}


def seeds() -> dict:
    code = ticket_code(SEATED)
    body = compact(PAYMENT_INTENT)
    failed = compact(FAILED_INTENT)
    admission = {"sub": "fan_1", "evt": "evt-fuzz", "sid": "s1", "exp": 1900000300, "typ": "admission"}
    queue = {"sub": "fan_1", "evt": "evt-fuzz", "idx": 7, "typ": "queue"}
    journal = [
        {"event": "evt-1", "create": ROOM},
        {"event": "evt-1", "op": {"op": "join", "accountId": "a", "nowMs": 900}},
        {"event": "evt-1", "op": {"op": "join", "accountId": "b", "nowMs": 950}},
        {"event": "evt-1", "op": {"op": "tick", "nowMs": 1000, "release": 2}},
        {"event": "evt-1", "op": {"op": "claim", "accountId": "a", "sessionId": "s1", "nowMs": 1001}},
        {"event": "evt-1", "op": {"op": "end", "accountId": "a", "atMs": 1200}},
        {"event": "evt-1", "op": {"op": "control", "paused": True, "maxReleasePerS": 5}},
    ]
    return {
        "ticket_code": {
            "verify-seated": b"\x00" + code.encode(),
            "verify-tier": b"\x00" + ticket_code(TIER).encode(),
            "signed-claims": b"\x01" + compact(SEATED),
            "signed-not-claims": b"\x01" + b'{"ticketId":',
            "round-trip": b"\x02" + b"0193a4f2\x10evt\x08ord\x01A-1-1\x00" + bytes(range(16)),
        },
        "jwt": {
            "fan": b"\x00" + hs256(JWT_SECRET, {"sub": "fan_1", "exp": 4102444800}).encode(),
            "admin": b"\x00"
            + hs256(JWT_SECRET, {"sub": "ops", "exp": 4102444800, "role": "admin"}).encode(),
            "alg-none": b"\x00"
            + (b64(compact({"alg": "none"})) + "." + b64(compact({"sub": "x", "exp": 1})) + ".").encode(),
            "signed-claims": b"\x01" + compact({"sub": "fan_1", "exp": 4102444800, "role": "admin"}),
            "minted": b"\x02" + b"\x05fan_1\x01" + bytes(8),
        },
        "waitroom_tokens": {
            "admission": b"\x00" + hs256(WAITROOM_SECRET, admission).encode(),
            "queue-ticket": b"\x00" + hs256(WAITROOM_SECRET, queue).encode(),
            "signed-admission": b"\x01" + compact(admission),
            "signed-queue": b"\x01" + compact(queue),
            "issued": b"\x02" + b"\x08evt-fuzz\x05fan_1\x02s1" + bytes(16),
        },
        "request_bodies": {
            "event": compact(EVENT),
            "trips": compact({"trip": EVENT, "everySeconds": 3600, "count": 3}),
            "hold-seats": b"k-hold-1\x00" + compact({"seatIds": ["A-1-3", "A-1-4"]}),
            "hold-tier": compact({"tierId": "GA", "quantity": 2.0, "idempotencyKey": "k-hold-2"}),
            "hold-best": compact(
                {"bestAvailable": {"quantity": 2, "section": "A", "maxPriceMinor": 5000}, "idempotencyKey": "k3"}
            ),
            "hold-best-together": compact(
                {"bestAvailable": {"quantity": 4, "together": "required"}, "idempotencyKey": "k4"}
            ),
            "checkout": compact({"paymentMethodToken": "pm_card_visa", "idempotencyKey": "k-pay-1"}),
            "exchange-seats": compact(
                {"fromSeatIds": ["A-1-1"], "toSeatIds": ["BALCONY-2-3"], "idempotencyKey": "k-x-1"}
            ),
            "exchange-tier": compact({"fromSeatIds": ["A-1-1", "A-1-2"], "toTierId": "GA", "idempotencyKey": "k-x-2"}),
            "queue": compact({"paused": True, "maxReleasePerSecond": 50}),
            "checkin": compact({"code": code}),
        },
        "ids": {
            "seat": b"A-12-7",
            "seat-balcony": b"BALCONY_2-1-999999",
            "account": b"fan.one-01_x",
            "status": b"PENDING_PAYMENT",
            "key": b"k-hold-1",
        },
        "seatmap_since": {
            "since": b"5\x00\x00" + compact({"s": [["A-1-1", "HELD", 1790000000000]], "t": [["GA", 12]]}) + b"\x00"
            + bytes([8, 1, 0, 0, 0, 0, 0, 0, 0, 5, 16, 3, 1, 1, 2, 0, 1, 1, 0, 1, 2]),
            "last-event-id": b"\x007\x00"
            + compact({"s": [["A-1-2", "SOLD", None], ["A-1-3", "AVAILABLE", None]]})
            + b"\x00" + bytes(range(32)),
            "bad-since": b"-1\x00 12 \x00{}\x00",
        },
        "stripe_webhook": {
            "signed-succeeded": stripe_signature(1900000000, body).encode() + b"\x00" + body,
            "signed-failed": stripe_signature(1900000100, failed).encode() + b"\x00" + failed,
            "two-signatures": (stripe_signature(1900000000, body) + ",v1=00ff").encode() + b"\x00" + body,
            "sign-it": b"\xff" + (1900000000).to_bytes(8, "little") + b"\x00" + body,
            "stale": stripe_signature(1, body).encode() + b"\x00" + body,
        },
        "venue_charts": {
            "hall-csv": b"\x00" + HALL_CSV,
            "hall-json": b"\x01" + compact(HALL_JSON),
            "bad-line": b"\x00" + HALL_CSV.replace(b"-20,56", b"west,56"),
        },
        "waitroom_journal": {
            "one-room": b"\n".join(compact(record) for record in journal) + b"\n",
            "torn-last-line": compact(journal[0]) + b"\n" + compact(journal[1])[:20],
        },
    }


def main() -> None:
    for target, files in seeds().items():
        folder = SEEDS / target
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        print(f"{target}: {len(files)} seeds")


if __name__ == "__main__":
    main()
