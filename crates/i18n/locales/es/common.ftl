common-seat = Asiento { $seat }
common-holder = Titular: { $name }
common-order = Pedido { $order }
