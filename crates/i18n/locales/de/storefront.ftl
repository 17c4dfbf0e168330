# Der Ticketshop (crates/server/web/index.html, app.js): jeder Text, den ein Fan dort liest.
# Platzhalter `{ $name }` füllt die Seite (i18n.js); Zahlen kommen passend zur Sprache
# formatiert. Eine Meldung, die von einer Anzahl abhängt, ist ein Select-Ausdruck darauf.

storefront-duration-few-seconds = wenige Sekunden
storefront-duration-seconds = etwa { $count } Sekunden
storefront-duration-minutes =
    { $count ->
        [one] etwa eine Minute
       *[other] etwa { $count } Minuten
    }
storefront-duration-hours = etwa { $hours } Std.
storefront-duration-hours-minutes = etwa { $hours } Std. { $minutes } Min.
storefront-error-http = Die Kasse antwortete mit HTTP { $status }.
storefront-error-network = Die Kasse ist gerade nicht erreichbar. Prüfen Sie Ihre Verbindung und versuchen Sie es erneut.
storefront-error-none-left-there = Leider sind dort keine Plätze mehr frei. Versuchen Sie einen anderen Block.
storefront-error-largest-block =
    { $count ->
        [one] Leider ist dort höchstens ein Platz zusammen frei. Fragen Sie nach einem, oder lassen Sie uns Ihre Gruppe aufteilen.
       *[other] Leider sind dort höchstens { $count } Plätze nebeneinander frei. Fragen Sie nach { $count }, oder lassen Sie uns Ihre Gruppe aufteilen.
    }
storefront-error-seats-taken =
    { $count ->
        [one] Leider wurde { $seats } gerade von jemand anderem genommen. Bitte wählen Sie andere Plätze.
       *[other] Leider wurden { $seats } gerade von jemand anderem genommen. Bitte wählen Sie andere Plätze.
    }
storefront-error-seats-unavailable = Leider sind diese Plätze nicht mehr verfügbar. Bitte wählen Sie andere Plätze.
storefront-error-sold-out = Leider sind nicht mehr genug Plätze frei.
storefront-error-transfer-conflict-because = Diese Weitergabe ist nicht möglich: { $detail }.
storefront-error-transfer-conflict = Diese Weitergabe ist nicht möglich.
storefront-error-transfer-closed = Weitergaben für diese Veranstaltung sind geschlossen.
storefront-error-waitlist-conflict = Sie stehen bereits auf dieser Warteliste.
storefront-error-purchase-limit = Sie haben die Höchstzahl von { $count } Tickets pro Konto für diese Veranstaltung erreicht.
storefront-error-purchase-limit-reached = Sie haben die Höchstzahl an Tickets pro Konto für diese Veranstaltung erreicht.
storefront-error-sale-opens = Der Verkauf beginnt am { $when }.
storefront-error-sale-not-open = Der Verkauf hat noch nicht begonnen.
storefront-error-event-cancelled = Diese Veranstaltung wurde abgesagt: Es wird nichts verkauft, und alle Käufer erhalten den vollen Betrag zurück.
storefront-error-admission = Ihre Einkaufssitzung ist abgelaufen. Sie sind zurück im Warteraum.
storefront-error-hold-expired = Ihre Reservierung ist abgelaufen, und die Plätze sind wieder im Verkauf.
storefront-error-hold-in-checkout = Diese Reservierung wird bereits bezahlt.
storefront-error-holders-required = Bitte geben Sie vor dem Bezahlen den Namen jedes Ticketinhabers an.
storefront-error-holder-change-closed = Der Inhaber dieses Tickets kann nicht mehr geändert werden: Änderungen sind für diese Veranstaltung geschlossen.
storefront-error-wallet-not-configured = Wallet-Pässe gibt es für diese Veranstaltung nicht.
storefront-error-tickets-not-issued = Ihre Tickets sind noch nicht ausgestellt. Versuchen Sie es gleich noch einmal.
storefront-error-busy = Gerade ist sehr viel los. Bitte versuchen Sie es gleich noch einmal.
storefront-error-sign-in-again = Bitte melden Sie sich erneut an.
storefront-error-not-found = Das haben wir nicht gefunden. Vielleicht gehört es zu einem anderen Konto.
storefront-error-queue-full = Der Warteraum ist voll. Bitte versuchen Sie es später noch einmal.
storefront-error-in-progress = Wir bearbeiten noch Ihre vorige Anfrage. Einen Moment…
storefront-error-validation-because = Bitte prüfen Sie Ihre Anfrage: { $detail }.
storefront-error-validation = Bitte prüfen Sie Ihre Anfrage.
storefront-error-server = Bei uns ist etwas schiefgegangen. Bitte versuchen Sie es erneut.
storefront-error-unknown = Etwas ist schiefgegangen. Bitte versuchen Sie es erneut.
storefront-signed-in-as = Angemeldet als
storefront-sign-out = Abmelden
storefront-sign-in = Anmelden
storefront-announce-signed-in = Angemeldet als { $account }
storefront-signin-no-demo = Dieser Server bietet keine Demo-Anmeldung. Fügen Sie stattdessen unten ein Zugriffstoken ein.
storefront-signin-bad-token = Das sieht nicht nach einem Zugriffstoken aus.
storefront-page-title = { $page } — boxoffice
storefront-sign-in-to-continue = Zum Fortfahren anmelden
storefront-events-title = Veranstaltungen
storefront-events-heading = Kommende Veranstaltungen
storefront-events-loading = Veranstaltungen werden geladen…
storefront-events-more = Weitere Veranstaltungen
storefront-events-none = Noch keine Veranstaltungen. Ein Betreiber kann auf der Admin-Seite eine anlegen.
storefront-event-places =
    { $count ->
        [one] ein Platz · ab { $price }
       *[other] { $count } Plätze · ab { $price }
    }
storefront-waiting-room-badge = Warteraum
storefront-choose-seats = Plätze wählen
storefront-choose-seats-for = für { $event }
storefront-card-visa = Visa •••• 4242
storefront-card-visa-note = Sofort genehmigt
storefront-card-3ds = Visa mit 3-D Secure
storefront-card-3ds-note = Ihre Bank bittet um Bestätigung
storefront-card-declined = Abgelehnte Karte
storefront-card-declined-note = Die Bank lehnt die Zahlung ab
storefront-card-slow = Langsame Bank
storefront-card-slow-note = Nach kurzer Wartezeit genehmigt
storefront-event-title = Veranstaltung
storefront-back-to-events = ← Alle Veranstaltungen
storefront-loading = Wird geladen…
storefront-event-not-found = Veranstaltung nicht gefunden
storefront-event-cancelled = Diese Veranstaltung wurde abgesagt: Es wird nichts verkauft. Alle, die ein Ticket gekauft haben, erhalten den vollen Betrag zurück.
storefront-sign-in-for-seats = Melden Sie sich an, um sich anzustellen und Ihre Plätze zu wählen.
storefront-queue-joining = Wird angestellt
storefront-queue-progress = Fortschritt bis zum Anfang der Schlange
storefront-queue-title = Sie sind im Warteraum
storefront-queue-explain = So viele Fans wollen Tickets, dass wir die Leute nach und nach der Reihe nach hereinlassen. Lassen Sie diese Seite geöffnet: Wir bringen Sie automatisch zu den Plätzen.
storefront-queue-place = Ihr Platz in der Schlange
storefront-queue-ahead = Personen vor Ihnen
storefront-queue-wait = Geschätzte Wartezeit
storefront-queue-status = Status
storefront-queue-live = Wird live aktualisiert
storefront-queue-wait-none = Keine
storefront-queue-state-waiting = Wartet
storefront-queue-state-admitted = Sie sind dran!
storefront-queue-state-expired = Platz verfallen
storefront-queue-state-sold-out = Ausverkauft
storefront-queue-all-held = Alle übrigen Plätze sind gerade von anderen Fans reserviert. Meist kommen einige zurück, wenn Reservierungen ablaufen oder Zahlungen scheitern; dann werden Sie hereingelassen.
storefront-queue-largest-block =
    { $count ->
        [one] Höchstens ein Platz ist in einer Reihe noch nebeneinander frei.
       *[other] Höchstens { $count } Plätze sind in einer Reihe noch nebeneinander frei.
    }
storefront-queue-no-block = Gerade sind keine Plätze nebeneinander frei.
storefront-queue-cancelled = Diese Veranstaltung wurde abgesagt: Es wird nichts mehr verkauft. Alle, die ein Ticket gekauft haben, erhalten den vollen Betrag zurück.
storefront-queue-sold-out = Ausverkauft: Alle Tickets sind vergeben. Wir behalten Ihren Platz und schauen ab und zu nach; kommen Tickets zurück, geht es hier weiter. Als Gruppe unterwegs? Die Warteliste bietet Plätze zusammen an, wenn welche zurückkommen.
storefront-queue-waitlist-link = Auf die Warteliste
storefront-queue-updated = Zuletzt aktualisiert { $time }
storefront-announce-queue =
    { $count ->
        [0] Warteraum: niemand vor Ihnen.
        [one] Warteraum: eine Person vor Ihnen.
       *[other] Warteraum: { $count } Personen vor Ihnen.
    }
storefront-announce-sold-out = Ausverkauft. Alle Tickets sind vergeben.
storefront-announce-cancelled = Diese Veranstaltung wurde abgesagt.
storefront-announce-your-turn = Sie sind dran! Wählen Sie Ihre Plätze.
storefront-queue-expired = Ihr Platz in der Schlange ist verfallen, weil Sie nicht rechtzeitig zurückgekommen sind.
storefront-queue-join-again = Erneut anstellen
storefront-queue-sign-in-expired = Ihre Anmeldung ist abgelaufen. Melden Sie sich erneut an, um Ihren Platz zu behalten.
storefront-queue-retrying = { $error } Wir versuchen es weiter.
storefront-map-role = Saalplan
storefront-map-label = Saalplan von { $event }. Pfeiltasten wechseln zwischen Plätzen, Eingabe oder Leertaste wählt aus.
storefront-map-loading = Plätze werden geladen…
storefront-legend = Legende
storefront-zoom-in = Vergrößern
storefront-zoom-out = Verkleinern
storefront-zoom-fit = Alles zeigen
storefront-side-label = Ihre Tickets
storefront-map-title = Saalplan
storefront-map-keys-pointer = Klicken oder tippen Sie auf Plätze, um sie zu wählen; ziehen zum Verschieben, scrollen oder spreizen zum Zoomen. Tastatur:
storefront-map-keys-move = bewegen,
storefront-map-keys-select = wählen,
storefront-map-keys-zoom = zoomen,
storefront-map-keys-section = Block wechseln.
storefront-selection-taken =
    { $count ->
        [one] Leider wurde { $seats } gerade von jemand anderem genommen.
       *[other] Leider wurden { $seats } gerade von jemand anderem genommen.
    }
storefront-session-until = Ihre Einkaufssitzung läuft bis { $time }.
storefront-legend-band = { $price } ({ $sections })
storefront-legend-held = Reserviert
storefront-legend-sold = Verkauft
storefront-legend-selection = Ihre Auswahl
storefront-legend-mine = Für Sie reserviert
storefront-best-any-section = Beliebiger Block
storefront-section-price = Block { $section } · { $price }
storefront-best-together-prefer = Nebeneinander, wenn möglich
storefront-best-together-required = Nur nebeneinander
storefront-best-together-no = Irgendwo in den Blöcken
storefront-best-submit = Plätze finden
storefront-best-title = Beste verfügbare Plätze
storefront-best-hint = Wir suchen für Sie nebeneinanderliegende Plätze in der besten Reihe.
storefront-best-seats = Plätze
storefront-best-section = Block
storefront-best-seating = Sitzordnung
storefront-best-left-title = Meiste Plätze noch nebeneinander
storefront-left-none = Block { $section }: keine mehr
storefront-left-seats =
    { $count ->
        [one] Block { $section }: ein Platz
       *[other] Block { $section }: { $count } Plätze
    }
storefront-tier-option-left = { $tier } · { $price } · noch { $count }
storefront-tier-option = { $tier } · { $price }
storefront-tier-title = Stehplätze
storefront-tier-area = Bereich
storefront-tier-tickets = Tickets
storefront-tier-hold = Tickets reservieren
storefront-hold-seats-count =
    { $count ->
        [one] Einen Platz reservieren
       *[other] { $count } Plätze reservieren
    }
storefront-hold-seats = Plätze reservieren
storefront-selection-title = Ihre Auswahl
storefront-selection-empty = Wählen Sie bis zu { $count } Plätze im Saalplan, oder lassen Sie uns die besten verfügbaren finden.
storefront-selection-tiers = Wählen Sie unten Ihre Tickets.
storefront-selection-remove = { $seat } entfernen
storefront-total = Summe
storefront-selection-clear = Auswahl löschen
storefront-announce-held =
    { $count ->
        [one] Ein Ticket ist für Sie reserviert. Bezahlen Sie, bevor die Zeit abläuft.
       *[other] { $count } Tickets sind für Sie reserviert. Bezahlen Sie, bevor die Zeit abläuft.
    }
storefront-hold-split = Es waren keine { $count } Plätze mehr nebeneinander frei, daher haben wir Ihre Gruppe so nah beieinander verteilt, wie der Saal es zulässt.
storefront-announce-one-minute = Noch eine Minute, um Ihre Plätze zu bezahlen.
storefront-hold-expired = Ihre Reservierung ist abgelaufen, und die Plätze sind wieder im Verkauf. Sie können erneut Plätze wählen.
storefront-announce-hold-expired = Ihre Reservierung ist abgelaufen.
storefront-tier-quantity = { $count } × { $tier }
storefront-pay-test-card = Mit einer Testkarte bezahlen
storefront-pay = { $amount } bezahlen
storefront-release = Plätze freigeben
storefront-held-title = Für Sie reservierte Plätze
storefront-time-left = Verbleibende Zeit zum Bezahlen
storefront-holder-unit = Ticket { $unit } · { $tier }
storefront-holder-name = Name des Inhabers
storefront-holder-name-optional = Name des Inhabers (optional)
storefront-holders-title = Ticketinhaber
storefront-holders-hint-required = Der Name der Person, die das Ticket nutzt, wird darauf gedruckt und am Einlass geprüft.
storefront-holders-hint-optional = Wenn Sie möchten, geben Sie den Namen der Person an, die das Ticket nutzt: Er wird auf das Ticket gedruckt.
storefront-released = Ihre Plätze wurden freigegeben.
storefront-holders-saving = Die Ticketinhaber werden gespeichert…
storefront-pay-contacting-slow = Ihre Bank wird kontaktiert (diese ist langsam)…
storefront-pay-contacting = Ihre Bank wird kontaktiert…
storefront-announce-paid = Zahlung bestätigt. Hier sind Ihre Tickets.
storefront-pay-declined = Ihre Zahlung wurde nicht genehmigt, daher sind die Plätze wieder im Verkauf. Bitte versuchen Sie es mit einer anderen Karte.
storefront-pay-cancelled = Die Bestellung wurde storniert, und die Plätze sind wieder im Verkauf.
storefront-pay-waiting-bank = Warten auf die Bestätigung Ihrer Bank…
storefront-pay-bank-waiting = Ihre Bank wartet auf Ihre Bestätigung.
storefront-pay-open-confirmation = Bestätigung öffnen
storefront-pay-checking = Die Zahlung wird geprüft…
storefront-pay-confirming = Ihre Zahlung wird bestätigt…
storefront-pay-still-checking = { $error } Wir prüfen weiter…
storefront-seat-label = Block { $section } · Reihe { $row } · Platz { $seat }
storefront-bank-unreachable = Ihre Bank war nicht erreichbar. Bitte versuchen Sie es erneut.
storefront-map-load-failed = Der Saalplan konnte nicht geladen werden ({ $error }). Neuer Versuch…
storefront-map-reconnecting = Verbindung wird wiederhergestellt…
storefront-map-polling = Aktualisierung alle paar Sekunden
storefront-map-status-live = ● Live · { $available } von { $count } Plätzen frei
storefront-map-status-updating = Wird aktualisiert · { $available } von { $count } Plätzen frei
storefront-map-locked = Bezahlen Sie die reservierten Plätze oder geben Sie sie frei, bevor Sie weitere wählen.
storefront-announce-seat-removed =
    { $count ->
        [0] { $seat } entfernt. Kein Platz gewählt.
        [one] { $seat } entfernt. Ein Platz gewählt.
       *[other] { $seat } entfernt. { $count } Plätze gewählt.
    }
storefront-seat-is-sold = { $seat } ist verkauft.
storefront-seat-is-held = { $seat } ist von jemand anderem reserviert.
storefront-selection-max = Sie können bis zu { $count } Plätze auf einmal wählen.
storefront-announce-seat-selected =
    { $count ->
        [one] { $seat } gewählt, { $price }. Ein Platz gewählt.
       *[other] { $seat } gewählt, { $price }. { $count } Plätze gewählt.
    }
storefront-announce-selection-cleared = Auswahl gelöscht.
storefront-cursor-map = Saalplan.
storefront-cursor-section = Block { $section }.
storefront-seat-state-mine = für Sie reserviert
storefront-seat-state-selected = gewählt
storefront-seat-state-sold = verkauft
storefront-seat-state-held = reserviert
storefront-seat-state-available = frei
storefront-announce-cursor = { $seat }, { $price }, { $state }.
storefront-map-stage = BÜHNE
storefront-ticket-live-code = Live-Code: wechselt in { $seconds } s
storefront-order-title = Ihre Bestellung
storefront-back-to-orders = ← Meine Bestellungen
storefront-sign-in-for-order = Melden Sie sich an, um Ihre Bestellung und Tickets zu sehen.
storefront-order-loading = Ihre Bestellung wird geladen…
storefront-order-tickets = Ihre Tickets
storefront-order-not-found = Bestellung nicht gefunden
storefront-retrying = { $error } Neuer Versuch…
storefront-back-to-map = Zurück zum Saalplan
storefront-all-events = Alle Veranstaltungen
storefront-order-confirmed = Ihre Bestellung ist bestätigt
storefront-order-pending = Warten auf Ihre Zahlung
storefront-order-cancelled = Ihre Bestellung wurde storniert
storefront-order-refunded = Ihre Bestellung wurde erstattet
storefront-order-event = Veranstaltung
storefront-order-order = Bestellung
storefront-order-status = Status
storefront-order-payment = Zahlung
storefront-order-seats = Plätze
storefront-order-tickets-count = Tickets
storefront-order-refunds = Erstattungen
storefront-refund-line = { $amount } { $status }
storefront-refund-line-failed = { $amount } { $status } ({ $failure }: Wir schulden Ihnen diesen Betrag noch; wenden Sie sich an den Veranstalter)
storefront-order-payment-failed = Die Zahlung ist nicht durchgegangen, daher wurden keine Tickets ausgestellt, und die Plätze sind wieder im Verkauf.
storefront-order-bank-confirm = Ihre Bank bittet Sie, diese Zahlung zu bestätigen.
storefront-order-bank-button = Bei Ihrer Bank bestätigen
storefront-order-confirming = Wir bestätigen Ihre Zahlung bei der Bank…
storefront-order-show-qr = Zeigen Sie die QR-Codes am Einlass. Jeder Code gilt einmal.
storefront-order-issuing = Zahlung bestätigt. Ihre Tickets werden ausgestellt…
storefront-ticket-qr-label = QR-Code des Tickets für { $ticket }
storefront-ticket-qr-loading = QR-Code wird geladen…
storefront-ticket = Ticket
storefront-ticket-standing = Stehplatz
storefront-ticket-qr-unavailable = QR-Code nicht verfügbar; zeigen Sie den Code unten.
storefront-status-confirmed = bestätigt
storefront-status-pending-payment = Zahlung ausstehend
storefront-status-cancelled = storniert
storefront-status-refunded = erstattet
storefront-payment-requires-action = Bestätigung nötig
storefront-payment-authorized = genehmigt
storefront-payment-captured = abgebucht
storefront-payment-failed = fehlgeschlagen
storefront-payment-voided = aufgehoben
storefront-payment-unknown = wird geprüft
storefront-refund-pending = ausstehend
storefront-refund-succeeded = erfolgt
storefront-refund-failed = fehlgeschlagen
storefront-ticket-refunded = Erstattet: nicht mehr gültig.
storefront-ticket-event-cancelled = Die Veranstaltung wurde abgesagt: Dieses Ticket ist ungültig, und Sie erhalten Ihr Geld zurück.
storefront-ticket-voided = Nicht mehr gültig: weitergegeben oder umgetauscht.
storefront-ticket-checked-in = Am Einlass benutzt.
storefront-ticket-exchanging = Wird umgetauscht.
storefront-pdf-save = PDF speichern
storefront-pdf-tickets = PDF-Tickets
storefront-pdf-preparing = Das PDF wird erstellt…
storefront-wallet-none = Wallet-Pässe gibt es für diese Veranstaltung nicht.
storefront-wallet-no-apple = Apple-Wallet-Pässe gibt es für diese Veranstaltung nicht.
storefront-wallet-no-google = Google-Wallet-Pässe gibt es für diese Veranstaltung nicht.
storefront-wallet-apple-save = Pass speichern
storefront-wallet-google-open = Google Wallet öffnen
storefront-wallet-apple = Apple Wallet
storefront-wallet-google = Google Wallet
storefront-wallet-preparing = Der Pass wird erstellt…
storefront-wallet-bad-link = Der Wallet-Link ist keine Webadresse.
storefront-ticket-holder = Inhaber: { $name }
storefront-ticket-no-holder = Noch kein Inhaber angegeben.
storefront-holder-change-submit = Inhaber speichern
storefront-holder-change-saving = Wird gespeichert…
storefront-holder-changed = { $name } nutzt dieses Ticket jetzt; es bleibt in Ihrem Konto.
storefront-holder-change = Inhaber ändern
storefront-holder-add = Inhaber angeben
storefront-refund-submit = Dieses Ticket erstatten
storefront-refund-asking = Erstattung wird beantragt…
storefront-refund-requested = Erstattung von { $amount } beantragt: Dieses Ticket ist nicht mehr gültig, und das Geld geht zurück auf Ihre Karte.
storefront-refund = Erstattung
storefront-refund-hint-fee = Sie erhalten den Ticketpreis zurück, abzüglich einer Gebühr von { $fee }.
storefront-refund-hint = Sie erhalten den Ticketpreis zurück.
storefront-give-label = Dieses Ticket weitergeben an (Kontoname)
storefront-give-submit = Anbieten
storefront-give-offering = Wird angeboten…
storefront-give-offered = { $account } angeboten. Das Ticket bleibt Ihres, bis angenommen wird.
storefront-give = Weitergeben
storefront-payment-authorizing = wird genehmigt
storefront-transfers-title = Weitergaben
storefront-sign-in-for-transfers = Melden Sie sich an, um Tickets zu sehen, die Ihnen angeboten wurden.
storefront-transfers-received = Ihnen angeboten
storefront-transfers-given = Von Ihnen angeboten
storefront-transfers-offered = Angeboten
storefront-transfers-from-to = Von / an
storefront-transfers-tickets = Tickets
storefront-transfers-status = Status
storefront-transfers-your-tickets = Ihre Tickets
storefront-transfers-accepted = Angenommen. Die Tickets gehören Ihnen.
storefront-transfers-declined = Angebot abgelehnt.
storefront-transfers-withdrawn = Angebot zurückgezogen.
storefront-transfers-accept = Annehmen
storefront-transfers-decline = Ablehnen
storefront-transfers-none-received = Niemand hat Ihnen Tickets angeboten.
storefront-transfers-withdraw = Zurückziehen
storefront-transfers-none-given = Sie haben niemandem Tickets angeboten. Öffnen Sie eine Bestellung, um ein Ticket weiterzugeben.
storefront-transfer-status-offered = angeboten
storefront-transfer-status-accepted = angenommen
storefront-transfer-status-declined = abgelehnt
storefront-transfer-status-withdrawn = zurückgezogen
storefront-transfer-status-expired = abgelaufen
storefront-transfer-status-cancelled = storniert
storefront-waitlist-title = Warteliste
storefront-back-to-event = ← Zurück zur Veranstaltung
storefront-sign-in-for-waitlist = Melden Sie sich an, um auf die Warteliste zu kommen.
storefront-waitlist-explain = { $event } ist ausverkauft. Sagen Sie uns, wie viele Plätze Ihre Gruppe braucht: Kommen genug zurück, reservieren wir sie { $duration } lang für Sie, alle oder keine, in der Reihenfolge der Anmeldung.
storefront-waitlist-seats = Plätze
storefront-waitlist-together = Plätze zusammen in einer Reihe
storefront-waitlist-waiting =
    { $count ->
        [one] Sie sind Nummer { $position } auf der Warteliste für einen Platz.
       *[other] Sie sind Nummer { $position } auf der Warteliste für { $count } Plätze.
    }
storefront-waitlist-offered = Für Sie sind Plätze zurückgekommen! Sie sind bis { $until } reserviert.
storefront-waitlist-purchased = Sie haben Ihre Plätze gekauft. Viel Spaß bei der Vorstellung!
storefront-waitlist-lapsed = Ihr Angebot ist abgelaufen, und die Plätze gingen an die nächste Gruppe. Sie können sich erneut eintragen.
storefront-waitlist-left = Sie haben die Warteliste verlassen.
storefront-waitlist-pay = Mit der Testkarte bezahlen
storefront-waitlist-leave = Warteliste verlassen
storefront-waitlist-joined = Sie stehen jetzt auf der Warteliste.
storefront-orders-title = Meine Bestellungen
storefront-sign-in-for-orders = Melden Sie sich an, um Ihre Bestellungen zu sehen.
storefront-orders-none = Noch keine Bestellungen.
storefront-orders-find-event = Eine Veranstaltung finden
storefront-orders-placed = Bestellt
storefront-language = Sprache
storefront-title = boxoffice — Tickets
storefront-skip-link = Zum Inhalt springen
storefront-brand-label = boxoffice, alle Veranstaltungen
storefront-nav-label = Hauptmenü
storefront-nav-events = Veranstaltungen
storefront-nav-orders = Meine Bestellungen
storefront-nav-transfers = Weitergaben
storefront-signin-demo-hint = Auf diesem Demo-Server können Sie einen beliebigen Kontonamen wählen.
storefront-signin-account = Kontoname
storefront-signin-account-hint = Buchstaben, Ziffern, Punkt, Bindestrich oder Unterstrich.
storefront-signin-token-instead = Stattdessen ein Token verwenden
storefront-signin-token = Zugriffstoken (JWT)
storefront-signin-token-use = Dieses Token verwenden
storefront-3ds-title = Ihre Bank bittet um Bestätigung
storefront-3ds-hint = Simulierte 3-D-Secure-Prüfung
storefront-3ds-question = Diese Zahlung an boxoffice genehmigen?
storefront-3ds-confirm = Zahlung bestätigen
storefront-3ds-fail = Authentifizierung scheitern lassen

## Verkaufsphasen und Zugangscodes
storefront-phases-title = Verkaufsphasen
storefront-phase-window = { $from } bis { $to }
storefront-phase-from = ab { $from }
storefront-phase-open = läuft jetzt
storefront-phase-later = noch nicht geöffnet
storefront-phase-ended = beendet
storefront-phase-code-badge = Zugangscode
storefront-phase-code-label = Ihr Zugangscode
storefront-phase-code-submit = Vorverkauf freischalten
storefront-phase-unlocked = Freigeschaltet: Sie können in { $phase } kaufen.
storefront-error-access-code-required = Dieser Vorverkauf ist für Inhaber eines Zugangscodes: Geben Sie Ihren Code oben ein.
storefront-error-access-code-invalid = Dieser Code gilt nicht für diesen Vorverkauf.
storefront-error-access-code-used-up = Dieser Code wurde bereits verwendet.
storefront-error-outside-phase = Diese Plätze sind in dieser Phase nicht im Verkauf.
storefront-error-phase-ended = Diese Verkaufsphase ist beendet.

## Ticket types, all-in prices and promo codes (issue 40)
storefront-types-title = Tickets nach Art
storefront-types-hint = Wie viele von jeder Art; alle auf 0 lassen für Standardtickets. Die Arten gehen der Reihe nach an Ihre Plätze.
storefront-type-standard = Standard
storefront-breakdown-face = Nennwert
storefront-breakdown-discount = Rabatt
storefront-breakdown-fees = Gebühren
storefront-breakdown-order-fees = Bestellgebühr
storefront-breakdown-tax-included = Enthaltene Steuer
storefront-breakdown-tax-added = Zuzüglich Steuer
storefront-promo-label = Aktionscode
