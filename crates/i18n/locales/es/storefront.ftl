# La taquilla en línea (crates/server/web/index.html, app.js): cada texto que un fan lee allí.
# La página rellena los marcadores `{ $name }` (i18n.js); los números llegan con el formato del
# idioma. Un mensaje que depende de una cantidad es una expresión de selección sobre ella.

storefront-duration-few-seconds = unos segundos
storefront-duration-seconds = unos { $count } segundos
storefront-duration-minutes =
    { $count ->
        [one] alrededor de un minuto
       *[other] unos { $count } minutos
    }
storefront-duration-hours = unas { $hours } h
storefront-duration-hours-minutes = unas { $hours } h { $minutes } min
storefront-error-http = La taquilla respondió HTTP { $status }.
storefront-error-network = Ahora mismo no podemos contactar con la taquilla. Compruebe su conexión e inténtelo de nuevo.
storefront-error-none-left-there = Lo sentimos, ya no quedan asientos ahí. Pruebe otra sección.
storefront-error-largest-block =
    { $count ->
        [one] Lo sentimos, ahí queda como mucho un asiento. Pida uno, o deje que repartamos a su grupo.
       *[other] Lo sentimos, ahí quedan como mucho { $count } asientos juntos. Pida { $count }, o deje que repartamos a su grupo.
    }
storefront-error-seats-taken =
    { $count ->
        [one] Lo sentimos, otra persona acaba de llevarse { $seats }. Elija otros asientos.
       *[other] Lo sentimos, otra persona acaba de llevarse { $seats }. Elija otros asientos.
    }
storefront-error-seats-unavailable = Lo sentimos, esos asientos ya no están disponibles. Elija otros asientos.
storefront-error-sold-out = Lo sentimos, no quedan suficientes plazas.
storefront-error-transfer-conflict-because = Esta cesión no puede hacerse: { $detail }.
storefront-error-transfer-conflict = Esta cesión no puede hacerse.
storefront-error-transfer-closed = Las cesiones de este evento están cerradas.
storefront-error-waitlist-conflict = Ya está en esta lista de espera.
storefront-error-purchase-limit = Ha alcanzado el límite de { $count } entradas por cuenta para este evento.
storefront-error-purchase-limit-reached = Ha alcanzado el límite de entradas por cuenta para este evento.
storefront-error-sale-opens = La venta abre el { $when }.
storefront-error-sale-not-open = La venta todavía no ha abierto.
storefront-error-event-cancelled = Este evento se canceló: no hay nada a la venta y a cada comprador se le devuelve el importe íntegro.
storefront-error-admission = Su sesión de compra ha terminado. Vuelve a estar en la sala de espera.
storefront-error-hold-expired = Su reserva caducó y los asientos volvieron a la venta.
storefront-error-hold-in-checkout = Esta reserva ya se está pagando.
storefront-error-holders-required = Indique el nombre del titular de cada entrada antes de pagar.
storefront-error-holder-change-closed = El titular de esta entrada ya no se puede cambiar: los cambios para este evento están cerrados.
storefront-error-wallet-not-configured = Los pases de Wallet no están disponibles para este evento.
storefront-error-tickets-not-issued = Sus entradas todavía no se han emitido. Inténtelo de nuevo en un momento.
storefront-error-busy = Ahora mismo hay mucha demanda. Inténtelo de nuevo en un momento.
storefront-error-sign-in-again = Vuelva a iniciar sesión.
storefront-error-not-found = No lo encontramos. Quizá pertenezca a otra cuenta.
storefront-error-queue-full = La sala de espera está llena. Inténtelo más tarde.
storefront-error-in-progress = Seguimos con su petición anterior. Un momento…
storefront-error-validation-because = Revise su petición: { $detail }.
storefront-error-validation = Revise su petición.
storefront-error-server = Algo falló por nuestra parte. Inténtelo de nuevo.
storefront-error-unknown = Algo falló. Inténtelo de nuevo.
storefront-signed-in-as = Sesión iniciada como
storefront-sign-out = Cerrar sesión
storefront-sign-in = Iniciar sesión
storefront-announce-signed-in = Sesión iniciada como { $account }
storefront-signin-no-demo = Este servidor no ofrece inicio de sesión de demostración. Pegue abajo un token de acceso.
storefront-signin-bad-token = Eso no parece un token de acceso.
storefront-page-title = { $page } — boxoffice
storefront-sign-in-to-continue = Inicie sesión para continuar
storefront-events-title = Eventos
storefront-events-heading = Próximos eventos
storefront-events-loading = Cargando eventos…
storefront-events-more = Ver más eventos
storefront-events-none = Todavía no hay eventos. Un operador puede crear uno en la página de administración.
storefront-event-places =
    { $count ->
        [one] una plaza · desde { $price }
       *[other] { $count } plazas · desde { $price }
    }
storefront-waiting-room-badge = Sala de espera
storefront-choose-seats = Elegir asientos
storefront-choose-seats-for = para { $event }
storefront-card-visa = Visa •••• 4242
storefront-card-visa-note = Aprobada al instante
storefront-card-3ds = Visa con 3-D Secure
storefront-card-3ds-note = Su banco le pide confirmar
storefront-card-declined = Tarjeta rechazada
storefront-card-declined-note = El banco rechaza el pago
storefront-card-slow = Banco lento
storefront-card-slow-note = Aprobada tras una breve espera
storefront-event-title = Evento
storefront-back-to-events = ← Todos los eventos
storefront-loading = Cargando…
storefront-event-not-found = Evento no encontrado
storefront-event-cancelled = Este evento se canceló: no hay nada a la venta. A quien compró una entrada se le devuelve el importe íntegro.
storefront-sign-in-for-seats = Inicie sesión para entrar en la cola y elegir sus asientos.
storefront-queue-joining = Entrando
storefront-queue-progress = Avance hasta el principio de la cola
storefront-queue-title = Está en la sala de espera
storefront-queue-explain = Hay tantos fans que quieren entradas que dejamos pasar a la gente poco a poco, por orden. Mantenga esta página abierta: le llevaremos a los asientos automáticamente.
storefront-queue-place = Su lugar en la cola
storefront-queue-ahead = Personas delante de usted
storefront-queue-wait = Espera estimada
storefront-queue-status = Estado
storefront-queue-live = Actualización en directo
storefront-queue-wait-none = Ninguna
storefront-queue-state-waiting = Esperando
storefront-queue-state-admitted = ¡Es su turno!
storefront-queue-state-expired = Lugar caducado
storefront-queue-state-sold-out = Agotado
storefront-queue-all-held = Todos los asientos que quedan están reservados por otros fans en este momento. Algunos suelen volver cuando caducan reservas o fallan pagos; entonces podrá pasar.
storefront-queue-largest-block =
    { $count ->
        [one] Como mucho queda un asiento libre en una fila.
       *[other] Como mucho quedan { $count } asientos libres juntos en una fila.
    }
storefront-queue-no-block = Ahora mismo no hay asientos libres juntos.
storefront-queue-cancelled = Este evento se canceló: ya no hay nada a la venta. A quien compró una entrada se le devuelve el importe íntegro.
storefront-queue-sold-out = Agotado: todas las entradas están vendidas. Guardamos su lugar y comprobamos de vez en cuando; si vuelven entradas, continúa desde aquí. ¿Viene en grupo? La lista de espera ofrece asientos juntos cuando vuelven.
storefront-queue-waitlist-link = Apuntarse a la lista de espera
storefront-queue-updated = Última actualización { $time }
storefront-announce-queue =
    { $count ->
        [0] Sala de espera: nadie delante de usted.
        [one] Sala de espera: una persona delante de usted.
       *[other] Sala de espera: { $count } personas delante de usted.
    }
storefront-announce-sold-out = Agotado. Todas las entradas están vendidas.
storefront-announce-cancelled = Este evento se canceló.
storefront-announce-your-turn = ¡Es su turno! Elija sus asientos.
storefront-queue-expired = Su lugar en la cola caducó porque no volvió a tiempo.
storefront-queue-join-again = Volver a la cola
storefront-queue-sign-in-expired = Su sesión caducó. Vuelva a iniciar sesión para mantener su lugar.
storefront-queue-retrying = { $error } Seguimos intentándolo.
storefront-map-role = plano de asientos
storefront-map-label = Plano de asientos de { $event }. Las flechas pasan de un asiento a otro, Intro o Espacio selecciona.
storefront-map-loading = Cargando asientos…
storefront-legend = Leyenda
storefront-zoom-in = Acercar
storefront-zoom-out = Alejar
storefront-zoom-fit = Ver todo
storefront-side-label = Sus entradas
storefront-map-title = Plano de asientos
storefront-map-keys-pointer = Haga clic o toque los asientos para elegirlos; arrastre para moverse, desplace o pellizque para ampliar. Teclado:
storefront-map-keys-move = mover,
storefront-map-keys-select = elegir,
storefront-map-keys-zoom = ampliar,
storefront-map-keys-section = cambiar de sección.
storefront-selection-taken =
    { $count ->
        [one] Lo sentimos, otra persona acaba de llevarse { $seats }.
       *[other] Lo sentimos, otra persona acaba de llevarse { $seats }.
    }
storefront-session-until = Su sesión de compra dura hasta las { $time }.
storefront-legend-band = { $price } ({ $sections })
storefront-legend-held = Reservado
storefront-legend-sold = Vendido
storefront-legend-selection = Su selección
storefront-legend-mine = Reservado para usted
storefront-best-any-section = Cualquier sección
storefront-section-price = Sección { $section } · { $price }
storefront-best-together-prefer = Juntos si es posible
storefront-best-together-required = Solo juntos
storefront-best-together-no = En cualquier lugar de las secciones
storefront-best-submit = Buscar asientos
storefront-best-title = Mejores disponibles
storefront-best-hint = Elegimos para usted asientos contiguos en la mejor fila.
storefront-best-seats = Asientos
storefront-best-section = Sección
storefront-best-seating = Ubicación
storefront-best-left-title = Máximo de asientos aún juntos
storefront-left-none = Sección { $section }: no queda ninguno
storefront-left-seats =
    { $count ->
        [one] Sección { $section }: un asiento
       *[other] Sección { $section }: { $count } asientos
    }
storefront-tier-option-left = { $tier } · { $price } · quedan { $count }
storefront-tier-option = { $tier } · { $price }
storefront-tier-title = Entradas de pie
storefront-tier-area = Zona
storefront-tier-tickets = Entradas
storefront-tier-hold = Reservar entradas
storefront-hold-seats-count =
    { $count ->
        [one] Reservar un asiento
       *[other] Reservar { $count } asientos
    }
storefront-hold-seats = Reservar asientos
storefront-selection-title = Su selección
storefront-selection-empty = Elija hasta { $count } asientos en el plano, o deje que busquemos los mejores disponibles.
storefront-selection-tiers = Elija sus entradas abajo.
storefront-selection-remove = Quitar { $seat }
storefront-total = Total
storefront-selection-clear = Borrar selección
storefront-announce-held =
    { $count ->
        [one] Tiene una entrada reservada. Pague antes de que termine el tiempo.
       *[other] Tiene { $count } entradas reservadas. Pague antes de que termine el tiempo.
    }
storefront-hold-split = No quedaban { $count } asientos juntos, así que repartimos a su grupo tan cerca como permite la sala.
storefront-announce-one-minute = Queda un minuto para pagar sus asientos.
storefront-hold-expired = Su reserva caducó y los asientos volvieron a la venta. Puede elegir asientos de nuevo.
storefront-announce-hold-expired = Su reserva caducó.
storefront-tier-quantity = { $count } × { $tier }
storefront-pay-test-card = Pagar con una tarjeta de prueba
storefront-pay = Pagar { $amount }
storefront-release = Liberar asientos
storefront-held-title = Asientos reservados para usted
storefront-time-left = Tiempo para pagar
storefront-holder-unit = Entrada { $unit } · { $tier }
storefront-holder-name = Nombre del titular
storefront-holder-name-optional = Nombre del titular (opcional)
storefront-holders-title = Titulares de las entradas
storefront-holders-hint-required = El nombre de quien usa cada entrada se imprime en ella y se comprueba en la puerta.
storefront-holders-hint-optional = Si quiere, añada el nombre de quien usa cada entrada: se imprime en la entrada.
storefront-released = Sus asientos se han liberado.
storefront-holders-saving = Guardando los titulares…
storefront-pay-contacting-slow = Contactando con su banco (este es lento)…
storefront-pay-contacting = Contactando con su banco…
storefront-announce-paid = Pago confirmado. Aquí están sus entradas.
storefront-pay-declined = Su pago no fue aprobado, así que los asientos volvieron a la venta. Inténtelo con otra tarjeta.
storefront-pay-cancelled = El pedido se canceló y los asientos volvieron a la venta.
storefront-pay-waiting-bank = Esperando la confirmación de su banco…
storefront-pay-bank-waiting = Su banco espera su confirmación.
storefront-pay-open-confirmation = Abrir la confirmación
storefront-pay-checking = Comprobando el pago…
storefront-pay-confirming = Confirmando su pago…
storefront-pay-still-checking = { $error } Seguimos comprobando…
storefront-seat-label = Sección { $section } · Fila { $row } · Asiento { $seat }
storefront-bank-unreachable = No pudimos contactar con su banco. Inténtelo de nuevo.
storefront-map-load-failed = No se pudo cargar el plano de asientos ({ $error }). Reintentando…
storefront-map-reconnecting = Reconectando…
storefront-map-polling = Actualización cada pocos segundos
storefront-map-status-live = ● En directo · { $available } de { $count } asientos libres
storefront-map-status-updating = Actualizando · { $available } de { $count } asientos libres
storefront-map-locked = Pague o libere los asientos reservados antes de elegir más.
storefront-announce-seat-removed =
    { $count ->
        [0] { $seat } quitado. Ningún asiento elegido.
        [one] { $seat } quitado. Un asiento elegido.
       *[other] { $seat } quitado. { $count } asientos elegidos.
    }
storefront-seat-is-sold = { $seat } está vendido.
storefront-seat-is-held = { $seat } está reservado por otra persona.
storefront-selection-max = Puede elegir hasta { $count } asientos a la vez.
storefront-announce-seat-selected =
    { $count ->
        [one] { $seat } elegido, { $price }. Un asiento elegido.
       *[other] { $seat } elegido, { $price }. { $count } asientos elegidos.
    }
storefront-announce-selection-cleared = Selección borrada.
storefront-cursor-map = Plano de asientos.
storefront-cursor-section = Sección { $section }.
storefront-seat-state-mine = reservado para usted
storefront-seat-state-selected = elegido
storefront-seat-state-sold = vendido
storefront-seat-state-held = reservado
storefront-seat-state-available = libre
storefront-announce-cursor = { $seat }, { $price }, { $state }.
storefront-map-stage = ESCENARIO
storefront-ticket-live-code = Código en vivo: cambia en { $seconds } s
storefront-order-title = Su pedido
storefront-back-to-orders = ← Mis pedidos
storefront-sign-in-for-order = Inicie sesión para ver su pedido y sus entradas.
storefront-order-loading = Cargando su pedido…
storefront-order-tickets = Sus entradas
storefront-order-not-found = Pedido no encontrado
storefront-retrying = { $error } Reintentando…
storefront-back-to-map = Volver al plano de asientos
storefront-all-events = Todos los eventos
storefront-order-confirmed = Su pedido está confirmado
storefront-order-pending = Esperando su pago
storefront-order-cancelled = Su pedido se canceló
storefront-order-refunded = Su pedido se reembolsó
storefront-order-event = Evento
storefront-order-order = Pedido
storefront-order-status = Estado
storefront-order-payment = Pago
storefront-order-seats = Asientos
storefront-order-tickets-count = Entradas
storefront-order-refunds = Reembolsos
storefront-refund-line = { $amount } { $status }
storefront-refund-line-failed = { $amount } { $status } ({ $failure }: todavía le debemos este importe; contacte con el organizador)
storefront-order-payment-failed = El pago no se completó, así que no se emitieron entradas y los asientos volvieron a la venta.
storefront-order-bank-confirm = Su banco necesita que confirme este pago.
storefront-order-bank-button = Confirmar con su banco
storefront-order-confirming = Estamos confirmando su pago con el banco…
storefront-order-show-qr = Muestre los códigos QR en la entrada. Cada código sirve una vez.
storefront-order-issuing = Pago confirmado. Se están emitiendo sus entradas…
storefront-ticket-qr-label = Código QR de la entrada para { $ticket }
storefront-ticket-qr-loading = Cargando el código QR…
storefront-ticket = Entrada
storefront-ticket-standing = De pie
storefront-ticket-qr-unavailable = Código QR no disponible; muestre el código de abajo.
storefront-status-confirmed = confirmado
storefront-status-pending-payment = pago pendiente
storefront-status-cancelled = cancelado
storefront-status-refunded = reembolsado
storefront-payment-requires-action = requiere confirmación
storefront-payment-authorized = autorizado
storefront-payment-captured = cobrado
storefront-payment-failed = fallido
storefront-payment-voided = anulado
storefront-payment-unknown = en comprobación
storefront-refund-pending = pendiente
storefront-refund-succeeded = completado
storefront-refund-failed = fallido
storefront-ticket-refunded = Reembolsada: ya no es válida.
storefront-ticket-event-cancelled = El evento se canceló: esta entrada ya no vale y se le devuelve el dinero.
storefront-ticket-voided = Ya no es válida: cedida a otra persona o cambiada.
storefront-ticket-checked-in = Usada en la puerta.
storefront-ticket-exchanging = En proceso de cambio.
storefront-pdf-save = Guardar el PDF
storefront-pdf-tickets = Entradas en PDF
storefront-pdf-preparing = Preparando el PDF…
storefront-wallet-none = Los pases de Wallet no están disponibles para este evento.
storefront-wallet-no-apple = Los pases de Apple Wallet no están disponibles para este evento.
storefront-wallet-no-google = Los pases de Google Wallet no están disponibles para este evento.
storefront-wallet-apple-save = Guardar el pase
storefront-wallet-google-open = Abrir Google Wallet
storefront-wallet-apple = Apple Wallet
storefront-wallet-google = Google Wallet
storefront-wallet-preparing = Preparando el pase…
storefront-wallet-bad-link = El enlace de Wallet no es una dirección web.
storefront-ticket-holder = Titular: { $name }
storefront-ticket-no-holder = Todavía sin titular.
storefront-holder-change-submit = Guardar titular
storefront-holder-change-saving = Guardando…
storefront-holder-changed = { $name } usará ahora esta entrada; sigue en su cuenta.
storefront-holder-change = Cambiar titular
storefront-holder-add = Indicar titular
storefront-refund-submit = Reembolsar esta entrada
storefront-refund-asking = Pidiendo el reembolso…
storefront-refund-requested = Reembolso de { $amount } solicitado: esta entrada ya no es válida y el dinero vuelve a su tarjeta.
storefront-refund = Reembolso
storefront-refund-hint-fee = Se le devuelve el precio de la entrada, menos una comisión de { $fee }.
storefront-refund-hint = Se le devuelve el precio de la entrada.
storefront-give-label = Ceder esta entrada a (nombre de cuenta)
storefront-give-submit = Ofrecer
storefront-give-offering = Ofreciendo…
storefront-give-offered = Ofrecida a { $account }. La entrada sigue siendo suya hasta que la acepte.
storefront-give = Ceder a otra persona
storefront-payment-authorizing = autorizando
storefront-transfers-title = Cesiones
storefront-sign-in-for-transfers = Inicie sesión para ver las entradas que le han ofrecido.
storefront-transfers-received = Ofrecidas a usted
storefront-transfers-given = Ofrecidas por usted
storefront-transfers-offered = Ofrecida
storefront-transfers-from-to = De / para
storefront-transfers-tickets = Entradas
storefront-transfers-status = Estado
storefront-transfers-your-tickets = Sus entradas
storefront-transfers-accepted = Aceptada. Las entradas son suyas.
storefront-transfers-declined = Oferta rechazada.
storefront-transfers-withdrawn = Oferta retirada.
storefront-transfers-accept = Aceptar
storefront-transfers-decline = Rechazar
storefront-transfers-none-received = Nadie le ha ofrecido entradas.
storefront-transfers-withdraw = Retirar
storefront-transfers-none-given = No ha ofrecido entradas a nadie. Abra un pedido para ceder una entrada.
storefront-transfer-status-offered = ofrecida
storefront-transfer-status-accepted = aceptada
storefront-transfer-status-declined = rechazada
storefront-transfer-status-withdrawn = retirada
storefront-transfer-status-expired = caducada
storefront-transfer-status-cancelled = cancelada
storefront-waitlist-title = Lista de espera
storefront-back-to-event = ← Volver al evento
storefront-sign-in-for-waitlist = Inicie sesión para apuntarse a la lista de espera.
storefront-waitlist-explain = { $event } está agotado. Díganos cuántos asientos necesita su grupo: cuando vuelvan suficientes, se los reservamos durante { $duration }, todos o ninguno, por orden de inscripción.
storefront-waitlist-seats = Asientos
storefront-waitlist-together = Asientos juntos en una fila
storefront-waitlist-waiting =
    { $count ->
        [one] Es el número { $position } de la lista de espera para un asiento.
       *[other] Es el número { $position } de la lista de espera para { $count } asientos.
    }
storefront-waitlist-offered = ¡Han vuelto asientos para usted! Están reservados hasta el { $until }.
storefront-waitlist-purchased = Ha comprado sus asientos. ¡Disfrute del espectáculo!
storefront-waitlist-lapsed = Su oferta caducó y los asientos pasaron al siguiente grupo. Puede apuntarse de nuevo.
storefront-waitlist-left = Ha salido de la lista de espera.
storefront-waitlist-pay = Pagar con la tarjeta de prueba
storefront-waitlist-leave = Salir de la lista de espera
storefront-waitlist-joined = Se ha apuntado a la lista de espera.
storefront-orders-title = Mis pedidos
storefront-sign-in-for-orders = Inicie sesión para ver sus pedidos.
storefront-orders-none = Todavía no hay pedidos.
storefront-orders-find-event = Buscar un evento
storefront-orders-placed = Realizado
storefront-language = Idioma
storefront-title = boxoffice — entradas
storefront-skip-link = Saltar al contenido
storefront-brand-label = boxoffice, todos los eventos
storefront-nav-label = Principal
storefront-nav-events = Eventos
storefront-nav-orders = Mis pedidos
storefront-nav-transfers = Cesiones
storefront-signin-demo-hint = Este servidor de demostración le deja elegir cualquier nombre de cuenta.
storefront-signin-account = Nombre de cuenta
storefront-signin-account-hint = Letras, cifras, punto, guion o guion bajo.
storefront-signin-token-instead = Usar un token
storefront-signin-token = Token de acceso (JWT)
storefront-signin-token-use = Usar este token
storefront-3ds-title = Su banco le pide confirmar
storefront-3ds-hint = Comprobación 3-D Secure simulada
storefront-3ds-question = ¿Aprobar este pago a boxoffice?
storefront-3ds-confirm = Confirmar el pago
storefront-3ds-fail = Hacer fallar la autenticación

## Fases de venta y códigos de acceso
storefront-phases-title = Fases de venta
storefront-phase-window = del { $from } al { $to }
storefront-phase-from = desde el { $from }
storefront-phase-open = en curso
storefront-phase-later = aún no abierta
storefront-phase-ended = terminada
storefront-phase-code-badge = Código de acceso
storefront-phase-code-label = Su código de acceso
storefront-phase-code-submit = Desbloquear preventa
storefront-phase-unlocked = Desbloqueado: puede comprar en { $phase }.
storefront-error-access-code-required = Esta preventa es para titulares de un código de acceso: introduzca su código arriba.
storefront-error-access-code-invalid = Ese código no es válido para esta preventa.
storefront-error-access-code-used-up = Ese código ya se ha usado.
storefront-error-outside-phase = Esos asientos no están a la venta en esta fase.
storefront-error-phase-ended = Esta fase de venta ha terminado.

## Ticket types, all-in prices and promo codes (issue 40)
storefront-types-title = Entradas por tipo
storefront-types-hint = Cuántas de cada tipo; déjalas todas en 0 para entradas estándar. Los tipos se asignan a tus asientos en orden.
storefront-type-standard = Estándar
storefront-breakdown-face = Valor nominal
storefront-breakdown-discount = Descuento
storefront-breakdown-fees = Gastos
storefront-breakdown-order-fees = Gastos del pedido
storefront-breakdown-tax-included = Impuestos incluidos
storefront-breakdown-tax-added = Impuestos añadidos
storefront-promo-label = Código promocional
