common-seat = 座位 { $seat }
common-holder = 持票人：{ $name }
common-order = 订单 { $order }
