common-seat = Platz { $seat }
common-holder = Inhaber: { $name }
common-order = Bestellung { $order }
