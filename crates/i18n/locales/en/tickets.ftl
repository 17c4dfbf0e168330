# The PDF tickets and the wallet passes (crates/delivery).
tickets-document-title = Tickets for { $event }
tickets-page = Ticket { $number } of { $count }
# A date: { $day } the day of the month, { $month } the month's name, { $time } 24-hour clock, { $zone } the UTC offset.
tickets-date = { $month } { $day }, { $year }, { $time } ({ $zone })
tickets-month-1 = January
tickets-month-2 = February
tickets-month-3 = March
tickets-month-4 = April
tickets-month-5 = May
tickets-month-6 = June
tickets-month-7 = July
tickets-month-8 = August
tickets-month-9 = September
tickets-month-10 = October
tickets-month-11 = November
tickets-month-12 = December
tickets-seat = Seat { $seat }
tickets-tier = General admission: { $tier }
tickets-holder = Holder: { $name }
tickets-ticket-id = Ticket ID: { $id }
tickets-order-id = Order ID: { $id }
tickets-scan = Show this code at the door. Each ticket admits one person once.
tickets-void = VOID
tickets-void-note = This ticket was voided and admits no one.
# The labels of a wallet pass's fields.
tickets-field-event = Event
tickets-field-date = Date
tickets-field-seat = Seat
tickets-field-tier = Admission
tickets-field-holder = Holder
tickets-field-order = Order
tickets-field-ticket = Ticket
tickets-field-status = Status
tickets-pass-description = Ticket for { $event }
