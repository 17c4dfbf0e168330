# The storefront (crates/server/web/index.html, app.js): every text a fan reads there.
# Placeables `{ $name }` are filled by the page (i18n.js); numbers come formatted for the
# language. A message that depends on a count is one select expression on it (`[0]` where
# nothing is a case of its own: French counts 0 as `one`).

storefront-duration-few-seconds = a few seconds
storefront-duration-seconds = about { $count } seconds
storefront-duration-minutes =
    { $count ->
        [one] about one minute
       *[other] about { $count } minutes
    }
storefront-duration-hours = about { $hours } h
storefront-duration-hours-minutes = about { $hours } h { $minutes } min
storefront-error-http = The box office answered HTTP { $status }.
storefront-error-network = We cannot reach the box office right now. Check your connection and try again.
storefront-error-none-left-there = Sorry, no seats are left there. Try another section.
storefront-error-largest-block =
    { $count ->
        [one] Sorry, at most one seat together is left there. Ask for one, or let us split your party.
       *[other] Sorry, at most { $count } seats together are left there. Ask for { $count }, or let us split your party.
    }
storefront-error-seats-taken =
    { $count ->
        [one] Sorry, { $seats } was just taken by someone else. Please pick other seats.
       *[other] Sorry, { $seats } were just taken by someone else. Please pick other seats.
    }
storefront-error-seats-unavailable = Sorry, those seats are no longer available. Please pick other seats.
storefront-error-sold-out = Sorry, there are not enough places left.
storefront-error-transfer-conflict-because = This transfer cannot go ahead: { $detail }.
storefront-error-transfer-conflict = This transfer cannot go ahead.
storefront-error-transfer-closed = Transfers for this event have closed.
storefront-error-waitlist-conflict = You are already on this waiting list.
storefront-error-purchase-limit = You have reached the limit of { $count } tickets per account for this event.
storefront-error-purchase-limit-reached = You have reached the limit of tickets per account for this event.
storefront-error-sale-opens = The sale opens { $when }.
storefront-error-sale-not-open = The sale has not opened yet.
storefront-error-event-cancelled = This event was cancelled: nothing is on sale, and every buyer is refunded in full.
storefront-error-admission = Your shopping session has ended. You are back in the waiting room.
storefront-error-hold-expired = Your hold expired and the seats went back on sale.
storefront-error-hold-in-checkout = This hold is already being paid for.
storefront-error-holders-required = Please give the name of each ticket holder before paying.
storefront-error-holder-change-closed = The holder of this ticket can no longer be changed: changes have closed for this event.
storefront-error-wallet-not-configured = Wallet passes are not available for this event.
storefront-error-tickets-not-issued = Your tickets are not issued yet. Try again in a moment.
storefront-error-busy = We are very busy right now. Please try again in a moment.
storefront-error-sign-in-again = Please sign in again.
storefront-error-not-found = We could not find that. It may belong to another account.
storefront-error-queue-full = The waiting room is full. Please try again later.
storefront-error-in-progress = We are still working on your previous request. One moment…
storefront-error-validation-because = Please check your request: { $detail }.
storefront-error-validation = Please check your request.
storefront-error-server = Something went wrong on our side. Please try again.
storefront-error-unknown = Something went wrong. Please try again.
storefront-signed-in-as = Signed in as
storefront-sign-out = Sign out
storefront-sign-in = Sign in
storefront-announce-signed-in = Signed in as { $account }
storefront-signin-no-demo = This server does not offer demo sign-in. Paste an access token below instead.
storefront-signin-bad-token = That does not look like an access token.
storefront-page-title = { $page } — boxoffice
storefront-sign-in-to-continue = Sign in to continue
storefront-events-title = Events
storefront-events-heading = Upcoming events
storefront-events-loading = Loading events…
storefront-events-more = Show more events
storefront-events-none = No events yet. An operator can create one on the admin page.
storefront-event-places =
    { $count ->
        [one] one place · from { $price }
       *[other] { $count } places · from { $price }
    }
storefront-waiting-room-badge = Waiting room
storefront-choose-seats = Choose seats
storefront-choose-seats-for = for { $event }
storefront-card-visa = Visa •••• 4242
storefront-card-visa-note = Approved at once
storefront-card-3ds = Visa with 3-D Secure
storefront-card-3ds-note = Your bank asks you to confirm
storefront-card-declined = Declined card
storefront-card-declined-note = The bank declines the payment
storefront-card-slow = Slow bank
storefront-card-slow-note = Approved after a short wait
storefront-event-title = Event
storefront-back-to-events = ← All events
storefront-loading = Loading…
storefront-event-not-found = Event not found
storefront-event-cancelled = This event was cancelled: nothing is on sale. Everyone who bought a ticket is refunded in full.
storefront-sign-in-for-seats = Sign in to join the queue and choose your seats.
storefront-queue-joining = Joining
storefront-queue-progress = Progress to the front of the line
storefront-queue-title = You are in the waiting room
storefront-queue-explain = So many fans want tickets that we let people in a few at a time, in order. Keep this page open: we take you to the seats automatically.
storefront-queue-place = Your place in line
storefront-queue-ahead = People ahead of you
storefront-queue-wait = Estimated wait
storefront-queue-status = Status
storefront-queue-live = Updating live
storefront-queue-wait-none = None
storefront-queue-state-waiting = Waiting
storefront-queue-state-admitted = Your turn!
storefront-queue-state-expired = Place expired
storefront-queue-state-sold-out = Sold out
storefront-queue-all-held = Every seat left is held by other fans right now. Some usually come back when holds lapse or payments fail; you will be let in as they do.
storefront-queue-largest-block =
    { $count ->
        [one] At most one seat is still free side by side in one row.
       *[other] At most { $count } seats are still free side by side in one row.
    }
storefront-queue-no-block = No seats are free side by side right now.
storefront-queue-cancelled = This event was cancelled: nothing is on sale any more. Everyone who bought a ticket is refunded in full.
storefront-queue-sold-out = Sold out: every ticket is taken. We keep your place and check now and then; if tickets come back, you continue from here. Coming as a group? The waiting list offers seats together when they come back.
storefront-queue-waitlist-link = Join the waiting list
storefront-queue-updated = Last updated { $time }
storefront-announce-queue =
    { $count ->
        [0] Waiting room: nobody ahead of you.
        [one] Waiting room: one person ahead of you.
       *[other] Waiting room: { $count } people ahead of you.
    }
storefront-announce-sold-out = Sold out. Every ticket is taken.
storefront-announce-cancelled = This event was cancelled.
storefront-announce-your-turn = It is your turn! Choose your seats.
storefront-queue-expired = Your place in line expired because you did not come back in time.
storefront-queue-join-again = Join the line again
storefront-queue-sign-in-expired = Your sign-in expired. Sign in again to keep your place.
storefront-queue-retrying = { $error } We keep trying.
storefront-map-role = seat map
storefront-map-label = Seat map of { $event }. Arrow keys move between seats, Enter or Space selects.
storefront-map-loading = Loading seats…
storefront-legend = Legend
storefront-zoom-in = Zoom in
storefront-zoom-out = Zoom out
storefront-zoom-fit = Show all
storefront-side-label = Your tickets
storefront-map-title = Seat map
storefront-map-keys-pointer = Click or tap seats to select them; drag to move, scroll or pinch to zoom. Keyboard:
storefront-map-keys-move = move,
storefront-map-keys-select = select,
storefront-map-keys-zoom = zoom,
storefront-map-keys-section = change section.
storefront-selection-taken =
    { $count ->
        [one] Sorry, { $seats } was just taken by someone else.
       *[other] Sorry, { $seats } were just taken by someone else.
    }
storefront-session-until = Your shopping session lasts until { $time }.
storefront-legend-band = { $price } ({ $sections })
storefront-legend-held = Held
storefront-legend-sold = Sold
storefront-legend-selection = Your selection
storefront-legend-mine = Held for you
storefront-best-any-section = Any section
storefront-section-price = Section { $section } · { $price }
storefront-best-together-prefer = Side by side if possible
storefront-best-together-required = Only side by side
storefront-best-together-no = Anywhere in the sections
storefront-best-submit = Find seats
storefront-best-title = Best available
storefront-best-hint = Let us pick adjacent seats in the best row for you.
storefront-best-seats = Seats
storefront-best-section = Section
storefront-best-seating = Seating
storefront-best-left-title = Most seats still side by side
storefront-left-none = Section { $section }: none left
storefront-left-seats =
    { $count ->
        [one] Section { $section }: one seat
       *[other] Section { $section }: { $count } seats
    }
storefront-tier-option-left = { $tier } · { $price } · { $count } left
storefront-tier-option = { $tier } · { $price }
storefront-tier-title = Standing tickets
storefront-tier-area = Area
storefront-tier-tickets = Tickets
storefront-tier-hold = Hold tickets
storefront-hold-seats-count =
    { $count ->
        [one] Hold one seat
       *[other] Hold { $count } seats
    }
storefront-hold-seats = Hold seats
storefront-selection-title = Your selection
storefront-selection-empty = Pick up to { $count } seats on the map, or let us find the best available.
storefront-selection-tiers = Choose your tickets below.
storefront-selection-remove = Remove { $seat }
storefront-total = Total
storefront-selection-clear = Clear selection
storefront-announce-held =
    { $count ->
        [one] Held one ticket for you. Complete payment before the timer runs out.
       *[other] Held { $count } tickets for you. Complete payment before the timer runs out.
    }
storefront-hold-split = No { $count } seats were left side by side, so we split your party as close together as the house allows.
storefront-announce-one-minute = One minute left to pay for your seats.
storefront-hold-expired = Your hold expired and the seats went back on sale. You can pick seats again.
storefront-announce-hold-expired = Your hold expired.
storefront-tier-quantity = { $count } × { $tier }
storefront-pay-test-card = Pay with a test card
storefront-pay = Pay { $amount }
storefront-release = Release seats
storefront-held-title = Seats held for you
storefront-time-left = Time left to pay
storefront-holder-unit = Ticket { $unit } · { $tier }
storefront-holder-name = Holder name
storefront-holder-name-optional = Holder name (optional)
storefront-holders-title = Ticket holders
storefront-holders-hint-required = The name of the person who uses each ticket is printed on it and checked at the door.
storefront-holders-hint-optional = Add the name of the person who uses each ticket, if you like: it is printed on the ticket.
storefront-released = Your seats were released.
storefront-holders-saving = Saving the ticket holders…
storefront-pay-contacting-slow = Contacting your bank (this one is slow)…
storefront-pay-contacting = Contacting your bank…
storefront-announce-paid = Payment confirmed. Here are your tickets.
storefront-pay-declined = Your payment was not approved, so the seats went back on sale. Please try again with another card.
storefront-pay-cancelled = The order was cancelled and the seats went back on sale.
storefront-pay-waiting-bank = Waiting for your bank’s confirmation…
storefront-pay-bank-waiting = Your bank is waiting for your confirmation.
storefront-pay-open-confirmation = Open the confirmation
storefront-pay-checking = Checking the payment…
storefront-pay-confirming = Confirming your payment…
storefront-pay-still-checking = { $error } Still checking…
storefront-seat-label = Section { $section } · Row { $row } · Seat { $seat }
storefront-bank-unreachable = We could not reach your bank. Please try again.
storefront-map-load-failed = Could not load the seat map ({ $error }). Retrying…
storefront-map-reconnecting = Reconnecting…
storefront-map-polling = Updating every few seconds
storefront-map-status-live = ● Live · { $available } of { $count } seats available
storefront-map-status-updating = Updating · { $available } of { $count } seats available
storefront-map-locked = Pay for or release the seats you hold before picking more.
storefront-announce-seat-removed =
    { $count ->
        [0] { $seat } removed. No seats selected.
        [one] { $seat } removed. One seat selected.
       *[other] { $seat } removed. { $count } seats selected.
    }
storefront-seat-is-sold = { $seat } is sold.
storefront-seat-is-held = { $seat } is held by someone else.
storefront-selection-max = You can pick up to { $count } seats at a time.
storefront-announce-seat-selected =
    { $count ->
        [one] { $seat } selected, { $price }. One seat selected.
       *[other] { $seat } selected, { $price }. { $count } seats selected.
    }
storefront-announce-selection-cleared = Selection cleared.
storefront-cursor-map = Seat map.
storefront-cursor-section = Section { $section }.
storefront-seat-state-mine = held for you
storefront-seat-state-selected = selected
storefront-seat-state-sold = sold
storefront-seat-state-held = held
storefront-seat-state-available = available
storefront-announce-cursor = { $seat }, { $price }, { $state }.
storefront-map-stage = STAGE
storefront-ticket-live-code = Live code: changes in { $seconds } s
storefront-order-title = Your order
storefront-back-to-orders = ← My orders
storefront-sign-in-for-order = Sign in to see your order and tickets.
storefront-order-loading = Loading your order…
storefront-order-tickets = Your tickets
storefront-order-not-found = Order not found
storefront-retrying = { $error } Retrying…
storefront-back-to-map = Back to the seat map
storefront-all-events = All events
storefront-order-confirmed = Your order is confirmed
storefront-order-pending = Waiting for your payment
storefront-order-cancelled = Your order was cancelled
storefront-order-refunded = Your order was refunded
storefront-order-event = Event
storefront-order-order = Order
storefront-order-status = Status
storefront-order-payment = Payment
storefront-order-seats = Seats
storefront-order-tickets-count = Tickets
storefront-order-refunds = Refunds
storefront-refund-line = { $amount } { $status }
storefront-refund-line-failed = { $amount } { $status } ({ $failure }: we still owe you this; contact the organiser)
storefront-order-payment-failed = The payment did not go through, so no tickets were issued and the seats went back on sale.
storefront-order-bank-confirm = Your bank needs you to confirm this payment.
storefront-order-bank-button = Confirm with your bank
storefront-order-confirming = We are confirming your payment with the bank…
storefront-order-show-qr = Show the QR codes at the entrance. Each code works once.
storefront-order-issuing = Payment confirmed. Your tickets are being issued…
storefront-ticket-qr-label = QR code of the ticket for { $ticket }
storefront-ticket-qr-loading = Loading QR code…
storefront-ticket = Ticket
storefront-ticket-standing = Standing
storefront-ticket-qr-unavailable = QR code unavailable; show the code below.
storefront-status-confirmed = confirmed
storefront-status-pending-payment = pending payment
storefront-status-cancelled = cancelled
storefront-status-refunded = refunded
storefront-payment-requires-action = requires action
storefront-payment-authorized = authorized
storefront-payment-captured = captured
storefront-payment-failed = failed
storefront-payment-voided = voided
storefront-payment-unknown = being checked
storefront-refund-pending = pending
storefront-refund-succeeded = succeeded
storefront-refund-failed = failed
storefront-ticket-refunded = Refunded: no longer valid.
storefront-ticket-event-cancelled = The event was cancelled: this ticket is void and your money goes back.
storefront-ticket-voided = No longer valid: given to someone else or exchanged.
storefront-ticket-checked-in = Used at the door.
storefront-ticket-exchanging = Being exchanged.
storefront-pdf-save = Save the PDF
storefront-pdf-tickets = PDF tickets
storefront-pdf-preparing = Preparing the PDF…
storefront-wallet-none = Wallet passes are not available for this event.
storefront-wallet-no-apple = Apple Wallet passes are not available for this event.
storefront-wallet-no-google = Google Wallet passes are not available for this event.
storefront-wallet-apple-save = Save the pass
storefront-wallet-google-open = Open Google Wallet
storefront-wallet-apple = Apple Wallet
storefront-wallet-google = Google Wallet
storefront-wallet-preparing = Preparing the pass…
storefront-wallet-bad-link = The wallet link is not a web address.
storefront-ticket-holder = Holder: { $name }
storefront-ticket-no-holder = No holder named yet.
storefront-holder-change-submit = Save holder
storefront-holder-change-saving = Saving…
storefront-holder-changed = { $name } will use this ticket now; it stays in your account.
storefront-holder-change = Change holder
storefront-holder-add = Name the holder
storefront-refund-submit = Refund this ticket
storefront-refund-asking = Asking for the refund…
storefront-refund-requested = Refund of { $amount } requested: this ticket is no longer valid, and the money goes back to your card.
storefront-refund = Refund
storefront-refund-hint-fee = You get the ticket’s price back, less a fee of { $fee }.
storefront-refund-hint = You get the ticket’s price back.
storefront-give-label = Give this ticket to (account name)
storefront-give-submit = Offer
storefront-give-offering = Offering…
storefront-give-offered = Offered to { $account }. The ticket stays yours until they accept.
storefront-give = Give to someone
storefront-payment-authorizing = authorizing
storefront-transfers-title = Transfers
storefront-sign-in-for-transfers = Sign in to see tickets offered to you.
storefront-transfers-received = Offered to you
storefront-transfers-given = You offered
storefront-transfers-offered = Offered
storefront-transfers-from-to = From / to
storefront-transfers-tickets = Tickets
storefront-transfers-status = Status
storefront-transfers-your-tickets = Your tickets
storefront-transfers-accepted = Accepted. The tickets are yours.
storefront-transfers-declined = Offer declined.
storefront-transfers-withdrawn = Offer withdrawn.
storefront-transfers-accept = Accept
storefront-transfers-decline = Decline
storefront-transfers-none-received = Nobody has offered you tickets.
storefront-transfers-withdraw = Withdraw
storefront-transfers-none-given = You have not offered tickets to anyone. Open an order to give a ticket.
storefront-transfer-status-offered = offered
storefront-transfer-status-accepted = accepted
storefront-transfer-status-declined = declined
storefront-transfer-status-withdrawn = withdrawn
storefront-transfer-status-expired = expired
storefront-transfer-status-cancelled = cancelled
storefront-waitlist-title = Waiting list
storefront-back-to-event = ← Back to the event
storefront-sign-in-for-waitlist = Sign in to join the waiting list.
storefront-waitlist-explain = { $event } is sold out. Tell us how many seats your party needs: when enough come back, we hold them for you for { $duration }, all or nothing, in the order people joined.
storefront-waitlist-seats = Seats
storefront-waitlist-together = Seats together in one row
storefront-waitlist-waiting =
    { $count ->
        [one] You are number { $position } on the waiting list for one seat.
       *[other] You are number { $position } on the waiting list for { $count } seats.
    }
storefront-waitlist-offered = Seats came back for you! They are held until { $until }.
storefront-waitlist-purchased = You bought your seats. Enjoy the show!
storefront-waitlist-lapsed = Your offer ran out and the seats went to the next party. You can join again.
storefront-waitlist-left = You left the waiting list.
storefront-waitlist-pay = Pay with the test card
storefront-waitlist-leave = Leave the waiting list
storefront-waitlist-joined = You joined the waiting list.
storefront-orders-title = My orders
storefront-sign-in-for-orders = Sign in to see your orders.
storefront-orders-none = No orders yet.
storefront-orders-find-event = Find an event
storefront-orders-placed = Placed
storefront-language = Language
storefront-title = boxoffice — tickets
storefront-skip-link = Skip to content
storefront-brand-label = boxoffice, all events
storefront-nav-label = Main
storefront-nav-events = Events
storefront-nav-orders = My orders
storefront-nav-transfers = Transfers
storefront-signin-demo-hint = This demo server lets you pick any account name.
storefront-signin-account = Account name
storefront-signin-account-hint = Letters, digits, dot, dash or underscore.
storefront-signin-token-instead = Use a token instead
storefront-signin-token = Access token (JWT)
storefront-signin-token-use = Use this token
storefront-3ds-title = Your bank asks you to confirm
storefront-3ds-hint = Simulated 3-D Secure check
storefront-3ds-question = Approve this payment to boxoffice?
storefront-3ds-confirm = Confirm payment
storefront-3ds-fail = Fail authentication

## Sale phases and access codes
storefront-phases-title = Sale phases
storefront-phase-window = { $from } to { $to }
storefront-phase-from = from { $from }
storefront-phase-open = on now
storefront-phase-later = not yet open
storefront-phase-ended = ended
storefront-phase-code-badge = Access code
storefront-phase-code-label = Your access code
storefront-phase-code-submit = Unlock presale
storefront-phase-unlocked = Unlocked: you can buy in { $phase }.
storefront-error-access-code-required = This presale is for access-code holders: enter your code above.
storefront-error-access-code-invalid = That code is not valid for this presale.
storefront-error-access-code-used-up = That code has been used already.
storefront-error-outside-phase = Those seats are not on sale in this phase.
storefront-error-phase-ended = This sale phase has ended.

## Ticket types, all-in prices and promo codes (issue 40)
storefront-types-title = Tickets by type
storefront-types-hint = How many of each; leave all at 0 for standard tickets. Types go to your seats in order.
storefront-type-standard = Standard
storefront-breakdown-face = Face value
storefront-breakdown-discount = Promo discount
storefront-breakdown-fees = Fees
storefront-breakdown-order-fees = Order fee
storefront-breakdown-tax-included = Tax included
storefront-breakdown-tax-added = Tax added
storefront-promo-label = Promo code
