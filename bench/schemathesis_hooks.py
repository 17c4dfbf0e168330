"""Schemathesis hooks for bench/schemathesis.sh: the few refusals a JSON Schema cannot state.

`positive_data_acceptance` (ST202) sends bodies that the OpenAPI document accepts and expects
them to be accepted. Some of boxoffice's rules relate two values, or a value and the data
already stored (an earlier request's key, the event's seats), which no schema can say, and
the contract (docs/API.md) fixes their answers (422 VALIDATION, 422
IDEMPOTENCY_KEY_REUSED, 410, 400 INVALID_TICKET). A refusal is excused here only when the
answer names exactly such a rule; every other failure, and every failure of every other
check, stands.

Only refusals (400, 410, 422) are excused: schemathesis takes 2xx, 3xx, 401, 403, 404, 409,
429 and 5xx as acceptance of a schema-valid request, so a 409 of the stored state (seats
taken, 100 webhook endpoints) never needs an excuse.

Nothing here excuses what the document could say (issue 36): the Idempotency-Key header is
required in it and the body's idempotencyKey is not described, so IDEMPOTENCY_KEY_REQUIRED
and IDEMPOTENCY_KEY_MISMATCH are failures like any other. A run without this file
(`SCHEMATHESIS_HOOKS= bash bench/schemathesis.sh`) shows what it excuses.
"""

import json
import os

import schemathesis

# Each excused refusal is counted here (one reason per line), for the run's report.
EXCUSED_LOG = os.environ.get("SCHEMATHESIS_EXCUSED_LOG")


def _excused(reason):
    if EXCUSED_LOG:
        with open(EXCUSED_LOG, "a", encoding="utf-8") as log:
            log.write(reason + "\n")
    return False

# 422 VALIDATION answers whose rule relates two fields or depends on the stored event
# (field, words of the detail). Everything the schema can say, it says.
RULES_BEYOND_A_SCHEMA = [
    # startReleasePerSecond <= maxReleasePerSecond (two fields).
    ("waitingRoom.startReleasePerSecond", "must be between"),
    # At most 200,000 seats (rows x seatsPerRow, summed over the sections).
    ("sections", "seats per event"),
    # Section names and tier ids unique within the event (uniqueItems compares whole items).
    ("sections[", "duplicate section name"),
    ("tiers[", "duplicate tier id"),
    # Holds and exchanges name seats, sections and tiers of the stored event, within its
    # own maxSeatsPerHold.
    ("seatIds", "unknown seat"),
    ("seatIds", "seats per hold"),
    ("tierId", "unknown tier"),
    ("quantity", "must be between 1 and"),
    ("bestAvailable.quantity", "must be 1-"),
    ("bestAvailable.section", "unknown section"),
    ("bestAvailable", "no reserved seats"),
    ("quantity", "must equal the number of seats"),
    ("toSeatIds", "must name as many seats as fromSeatIds"),
    ("toSeatIds", "is not a seat of event"),
    ("toSeatIds", "is also given up"),
    ("toTierId", "has no tier"),
    ("toEventId", "the order was paid in"),
    # A trips request creates at most 200,000 seats in all (count x the trip's seats).
    ("count", "seats per trip must be at most"),
    ("quantity", "per request on event"),
    # The waiting list: a section of the stored event, within its maxSeatsPerHold, reserved
    # seating only.
    ("section", "has no section"),
    ("quantity", "on this event"),
    ("quantity", "reserved seating"),
    # ...and a price cap no lower than the stored event's (or section's) cheapest seat.
    ("maxPriceMinor", "must be at least the"),
    # A transfer goes to another account than the caller's.
    ("toAccountId", "the giver's own account"),
    # An organiser's refund gives back at most what the stored order paid less its refunds
    # (the contract's 422 VALIDATION), and names tickets of the stored order.
    ("amountMinor", "can still go back to this order"),
    ("ticketIds", "is not a ticket of this order"),
    # An event's holder questions are unique by questionId (uniqueItems compares whole items).
    ("holderPolicy.questions[", "asked twice"),
    # A hold's holders name the stored hold's seats or units (1 to its quantity), each once,
    # by its seatId or its unit (a hold of seats or of a tier: the stored hold says which).
    ("holders[", "is not a seat of this hold"),
    ("holders[", "unit must be 1-"),
    ("holders[", "this ticket is named twice"),
    ("holders[", "names either a seatId"),
    # Answers answer the stored event's questions, each of its question's kind (a date or
    # text), and a ticket keeps what the stored policy requires.
    ("holders[", "the event asks no such question"),
    ("holders[", "a date, YYYY-MM-DD"),
    ("holder.answers.", "the event asks no such question"),
    ("holder.answers.", "a date, YYYY-MM-DD"),
    ("holder.", "required by the event"),
    # Issue 40. An event's sale setup names the sections, tiers and seats of the same
    # request's layout; a phase's end comes after its start; ids are unique in their list
    # (uniqueItems compares whole items); an allocation keeps at most 1,000 seats and units
    # (seatIds is bounded in the document, the units are counts in a map).
    ("phases[", "is no section of the event"),
    ("phases[", "is no tier of the event"),
    ("phases[", "must be after startsAt"),
    ("phases[", "duplicate phase id"),
    # A phase's own waiting room: startReleasePerSecond <= maxReleasePerSecond, as the event's.
    ("phases[", ".waitingRoom.startReleasePerSecond: must be between"),
    ("ticketTypes[", "is no section or tier of the event"),
    ("ticketTypes[", "must be unique and not"),
    ("allocations[", "is no seat of the event"),
    ("allocations[", "kept twice"),
    ("allocations[", "is no tier of the event"),
    ("allocations[", "seats and units per allocation"),
    ("allocations[", "from 1 to the tier's capacity"),
    ("allocations[", "duplicate allocation id"),
    # A hold's ticket types are the stored event's, sold where its seats are, counting its
    # seats, within each type's maxPerOrder.
    ("ticketTypes", "unknown ticket type"),
    ("ticketTypes", "the counts sum to"),
    ("ticketTypes", "tickets per order"),
    ("ticketTypes", "is not sold"),
    # The allocation routes name the stored event's seats and tiers, and the stored
    # allocation's kept seats and tiers; a comp of units without tierId needs an allocation
    # that keeps one tier.
    ("seatIds", "is no seat of the event"),
    ("seatIds", "kept twice"),
    ("tierUnits", "is no tier of the event"),
    ("tierUnits", "from 1 to the tier's capacity"),
    ("seatIds", "seats and units per allocation"),
    ("tierId", "keeps units of several tiers"),
    # A promo code's window relates two fields; its ticket types are the stored event's.
    ("validUntil", "after validFrom"),
    ("ticketTypes[", "unknown ticket type"),
    ("ticketTypes", "too many types"),
    # Issue 41. An event's (or a trip's) chart is a stored one, and its prices name the
    # stored chart's categories, each one it uses.
    ("chart.chartId", "no venue chart"),
    ("chart.categoryPrices.", "the chart has no category"),
    ("chart.categoryPrices.", "is used by the chart and has no price"),
]

# Issue 41: a venue chart's 422 INVALID_CHART lists its problems (docs/VENUES.md). Those a
# JSON Schema cannot state are excused, each by its field and words; a refusal is excused
# only when every problem it lists is one of them. Uniqueness compares one member of whole
# items (uniqueItems compares whole items), a category named must be among the chart's, a
# companion seat needs a wheelchair space in its row, the counts are summed across sections,
# the members a section needs depend on its kind, and a box's far corner adds two fields.
CHART_RULES_BEYOND_A_SCHEMA = [
    ("categories[", "duplicate category key"),
    ("sections[", "duplicate section name"),
    ("sections[", "duplicate row label"),
    ("sections[", "duplicate seat label"),
    ("sections[", "is at the position of seat"),
    ("sections[", "unknown category"),
    ("sections[", "needs a wheelchair space"),
    ("sections", "seats per chart"),
    ("sections", "reserved sections"),
    ("sections", "standing areas"),
    ("sections[", "has no rows"),
    ("sections[", "belongs to a standing area"),
    ("sections[", "needs a capacity"),
    ("sections[", "needs a category"),
    ("sections[", "needs an outline or a box"),
    ("sections[", "not both"),
    ("sections[", "corners; it has"),
    ("sections[", "coordinates must be finite"),
]


def _chart_rule_beyond_a_schema(problem):
    """Every problem of an INVALID_CHART answer is a rule no schema can state; a CSV body
    (`line` given) is text the document describes as a string: its rules are the CSV's."""
    problems = problem.get("problems") or []
    if not problems:
        return False
    for item in problems:
        if item.get("line") is not None:
            continue
        field = item.get("field", "")
        reason = item.get("reason", "")
        if not any(field.startswith(f) and words in reason for f, words in CHART_RULES_BEYOND_A_SCHEMA):
            return False
    return True


def _problem(response):
    try:
        return json.loads(response.content)
    except ValueError:
        return {}


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keep every failure but the excused refusals of schema-valid requests."""
    if getattr(failure, "code", None) != "ST202":
        return True
    problem = _problem(response)
    code = problem.get("code")
    status = response.status_code
    label = f"{case.method.upper()} {case.operation.path}"
    # The key was used before, for another request of this account on this endpoint (the
    # generator repeats short keys): the stored state decides, API.md's 422.
    if status == 422 and code == "IDEMPOTENCY_KEY_REUSED":
        return _excused("422 IDEMPOTENCY_KEY_REUSED (key used before for another request)")
    # A ticket code is a signed token: one that does not verify is refused (API.md: 400).
    if label == "POST /v1/admin/checkin" and status == 400 and code == "INVALID_TICKET":
        return _excused("400 INVALID_TICKET (check-in code does not verify)")
    # A webhook endpoint's URL must parse as a URL with a host (WHATWG URL, the `url`
    # crate): the schema's pattern says http(s)://host...; which hosts parse (IDNA and
    # punycode labels, IPv4 numbers, IPv6 literals, ports up to 65535) is no regular language
    # the document could state without refusing URLs the server rightly takes.
    if label == "POST /v1/admin/webhooks":
        if status == 422 and code == "VALIDATION" and problem.get("field") == "url" and "is not a valid URL" in problem.get("detail", ""):
            return _excused("422 VALIDATION url: is not a valid URL")
    # A version the seat map never had, or no longer keeps (API.md: 410, refetch).
    if label == "GET /v1/events/{eventId}/seatmap/changes" and status == 410 and code == "SNAPSHOT_TOO_OLD":
        return _excused("410 SNAPSHOT_TOO_OLD (a version the map does not have)")
    if label in ("POST /v1/admin/venue-charts", "POST /v1/admin/venue-charts/validate"):
        if status == 422 and code == "INVALID_CHART" and _chart_rule_beyond_a_schema(problem):
            return _excused("422 INVALID_CHART (a chart rule beyond a schema)")
        # `?name=` goes with a text/csv body only: a rule of the query and the media type.
        if status == 422 and code == "VALIDATION" and problem.get("field") == "name" and "text/csv body" in problem.get("detail", ""):
            return _excused("422 VALIDATION name: with a text/csv body only")
    if status == 422 and code == "VALIDATION":
        field = problem.get("field", "")
        # A trip is an event: its fields are named "trip.<field>".
        field = field.removeprefix("trip.")
        detail = problem.get("detail", "")
        for rule_field, words in RULES_BEYOND_A_SCHEMA:
            if field.startswith(rule_field) and words in detail:
                return _excused(f"422 VALIDATION {rule_field}: {words}")
    return True
