common-seat = Place { $seat }
common-holder = Titulaire : { $name }
common-order = Commande { $order }
