# Words every part shares.
common-seat = Seat { $seat }
common-holder = Holder: { $name }
common-order = Order { $order }
