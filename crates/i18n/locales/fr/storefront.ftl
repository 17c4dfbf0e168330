# La billetterie en ligne (crates/server/web/index.html, app.js) : chaque texte qu'un fan y lit.
# La page remplit les paramètres `{ $name }` (i18n.js) ; les nombres arrivent formatés pour la
# langue. Un message qui dépend d'un nombre est une expression de sélection sur ce nombre.

storefront-duration-few-seconds = quelques secondes
storefront-duration-seconds = environ { $count } secondes
storefront-duration-minutes =
    { $count ->
        [one] environ une minute
       *[other] environ { $count } minutes
    }
storefront-duration-hours = environ { $hours } h
storefront-duration-hours-minutes = environ { $hours } h { $minutes } min
storefront-error-http = La billetterie a répondu HTTP { $status }.
storefront-error-network = Impossible de joindre la billetterie pour le moment. Vérifiez votre connexion et réessayez.
storefront-error-none-left-there = Désolé, il ne reste plus de places ici. Essayez une autre section.
storefront-error-largest-block =
    { $count ->
        [one] Désolé, il ne reste au plus qu'une place ici. Demandez-en une, ou laissez-nous répartir votre groupe.
       *[other] Désolé, il ne reste au plus que { $count } places côte à côte ici. Demandez-en { $count }, ou laissez-nous répartir votre groupe.
    }
storefront-error-seats-taken =
    { $count ->
        [one] Désolé, { $seats } vient d'être pris par quelqu'un d'autre. Choisissez d'autres places.
       *[other] Désolé, { $seats } viennent d'être pris par quelqu'un d'autre. Choisissez d'autres places.
    }
storefront-error-seats-unavailable = Désolé, ces places ne sont plus disponibles. Choisissez d'autres places.
storefront-error-sold-out = Désolé, il ne reste pas assez de places.
storefront-error-transfer-conflict-because = Ce transfert ne peut pas avoir lieu : { $detail }.
storefront-error-transfer-conflict = Ce transfert ne peut pas avoir lieu.
storefront-error-transfer-closed = Les transferts sont fermés pour cet événement.
storefront-error-waitlist-conflict = Vous êtes déjà sur cette liste d'attente.
storefront-error-purchase-limit = Vous avez atteint la limite de { $count } billets par compte pour cet événement.
storefront-error-purchase-limit-reached = Vous avez atteint la limite de billets par compte pour cet événement.
storefront-error-sale-opens = La vente ouvre le { $when }.
storefront-error-sale-not-open = La vente n'est pas encore ouverte.
storefront-error-event-cancelled = Cet événement a été annulé : rien n'est en vente, et chaque acheteur est remboursé intégralement.
storefront-error-admission = Votre session d'achat est terminée. Vous êtes de retour dans la salle d'attente.
storefront-error-hold-expired = Votre réservation a expiré et les places sont de nouveau en vente.
storefront-error-hold-in-checkout = Cette réservation est déjà en cours de paiement.
storefront-error-holders-required = Indiquez le nom de chaque titulaire de billet avant de payer.
storefront-error-holder-change-closed = Le titulaire de ce billet ne peut plus être changé : les modifications sont fermées pour cet événement.
storefront-error-wallet-not-configured = Les cartes Wallet ne sont pas disponibles pour cet événement.
storefront-error-tickets-not-issued = Vos billets ne sont pas encore émis. Réessayez dans un instant.
storefront-error-busy = Nous sommes très sollicités en ce moment. Réessayez dans un instant.
storefront-error-sign-in-again = Veuillez vous reconnecter.
storefront-error-not-found = Introuvable. Cela appartient peut-être à un autre compte.
storefront-error-queue-full = La salle d'attente est pleine. Réessayez plus tard.
storefront-error-in-progress = Nous traitons encore votre demande précédente. Un instant…
storefront-error-validation-because = Vérifiez votre demande : { $detail }.
storefront-error-validation = Vérifiez votre demande.
storefront-error-server = Un problème est survenu de notre côté. Réessayez.
storefront-error-unknown = Un problème est survenu. Réessayez.
storefront-signed-in-as = Connecté en tant que
storefront-sign-out = Se déconnecter
storefront-sign-in = Se connecter
storefront-announce-signed-in = Connecté en tant que { $account }
storefront-signin-no-demo = Ce serveur ne propose pas de connexion de démonstration. Collez plutôt un jeton d'accès ci-dessous.
storefront-signin-bad-token = Cela ne ressemble pas à un jeton d'accès.
storefront-page-title = { $page } — boxoffice
storefront-sign-in-to-continue = Connectez-vous pour continuer
storefront-events-title = Événements
storefront-events-heading = Événements à venir
storefront-events-loading = Chargement des événements…
storefront-events-more = Plus d'événements
storefront-events-none = Aucun événement pour l'instant. Un opérateur peut en créer un sur la page d'administration.
storefront-event-places =
    { $count ->
        [one] une place · à partir de { $price }
       *[other] { $count } places · à partir de { $price }
    }
storefront-waiting-room-badge = Salle d'attente
storefront-choose-seats = Choisir des places
storefront-choose-seats-for = pour { $event }
storefront-card-visa = Visa •••• 4242
storefront-card-visa-note = Acceptée immédiatement
storefront-card-3ds = Visa avec 3-D Secure
storefront-card-3ds-note = Votre banque vous demande de confirmer
storefront-card-declined = Carte refusée
storefront-card-declined-note = La banque refuse le paiement
storefront-card-slow = Banque lente
storefront-card-slow-note = Acceptée après une courte attente
storefront-event-title = Événement
storefront-back-to-events = ← Tous les événements
storefront-loading = Chargement…
storefront-event-not-found = Événement introuvable
storefront-event-cancelled = Cet événement a été annulé : rien n'est en vente. Chaque personne ayant acheté un billet est remboursée intégralement.
storefront-sign-in-for-seats = Connectez-vous pour rejoindre la file et choisir vos places.
storefront-queue-joining = Inscription
storefront-queue-progress = Progression vers le début de la file
storefront-queue-title = Vous êtes dans la salle d'attente
storefront-queue-explain = Tant de fans veulent des billets que nous faisons entrer les gens quelques-uns à la fois, dans l'ordre. Gardez cette page ouverte : nous vous amenons aux places automatiquement.
storefront-queue-place = Votre place dans la file
storefront-queue-ahead = Personnes devant vous
storefront-queue-wait = Attente estimée
storefront-queue-status = État
storefront-queue-live = Mise à jour en direct
storefront-queue-wait-none = Aucune
storefront-queue-state-waiting = En attente
storefront-queue-state-admitted = C'est votre tour !
storefront-queue-state-expired = Place expirée
storefront-queue-state-sold-out = Complet
storefront-queue-all-held = Toutes les places restantes sont réservées par d'autres fans en ce moment. Certaines reviennent souvent quand des réservations expirent ou des paiements échouent ; vous entrerez à ce moment-là.
storefront-queue-largest-block =
    { $count ->
        [one] Au plus une place est encore libre côte à côte dans un rang.
       *[other] Au plus { $count } places sont encore libres côte à côte dans un rang.
    }
storefront-queue-no-block = Aucune place n'est libre côte à côte en ce moment.
storefront-queue-cancelled = Cet événement a été annulé : plus rien n'est en vente. Chaque personne ayant acheté un billet est remboursée intégralement.
storefront-queue-sold-out = Complet : tous les billets sont pris. Nous gardons votre place et vérifions de temps en temps ; si des billets reviennent, vous continuez d'ici. Vous venez en groupe ? La liste d'attente propose des places ensemble quand elles reviennent.
storefront-queue-waitlist-link = Rejoindre la liste d'attente
storefront-queue-updated = Dernière mise à jour { $time }
storefront-announce-queue =
    { $count ->
        [0] Salle d'attente : personne devant vous.
        [one] Salle d'attente : une personne devant vous.
       *[other] Salle d'attente : { $count } personnes devant vous.
    }
storefront-announce-sold-out = Complet. Tous les billets sont pris.
storefront-announce-cancelled = Cet événement a été annulé.
storefront-announce-your-turn = C'est votre tour ! Choisissez vos places.
storefront-queue-expired = Votre place dans la file a expiré parce que vous n'êtes pas revenu à temps.
storefront-queue-join-again = Rejoindre la file à nouveau
storefront-queue-sign-in-expired = Votre connexion a expiré. Reconnectez-vous pour garder votre place.
storefront-queue-retrying = { $error } Nous continuons d'essayer.
storefront-map-role = plan de salle
storefront-map-label = Plan de salle de { $event }. Les flèches passent d'une place à l'autre, Entrée ou Espace sélectionne.
storefront-map-loading = Chargement des places…
storefront-legend = Légende
storefront-zoom-in = Zoom avant
storefront-zoom-out = Zoom arrière
storefront-zoom-fit = Tout afficher
storefront-side-label = Vos billets
storefront-map-title = Plan de salle
storefront-map-keys-pointer = Cliquez ou touchez les places pour les choisir ; faites glisser pour déplacer, faites défiler ou pincez pour zoomer. Clavier :
storefront-map-keys-move = déplacer,
storefront-map-keys-select = choisir,
storefront-map-keys-zoom = zoomer,
storefront-map-keys-section = changer de section.
storefront-selection-taken =
    { $count ->
        [one] Désolé, { $seats } vient d'être pris par quelqu'un d'autre.
       *[other] Désolé, { $seats } viennent d'être pris par quelqu'un d'autre.
    }
storefront-session-until = Votre session d'achat dure jusqu'à { $time }.
storefront-legend-band = { $price } ({ $sections })
storefront-legend-held = Réservée
storefront-legend-sold = Vendue
storefront-legend-selection = Votre sélection
storefront-legend-mine = Réservée pour vous
storefront-best-any-section = N'importe quelle section
storefront-section-price = Section { $section } · { $price }
storefront-best-together-prefer = Côte à côte si possible
storefront-best-together-required = Uniquement côte à côte
storefront-best-together-no = N'importe où dans les sections
storefront-best-submit = Trouver des places
storefront-best-title = Meilleures places disponibles
storefront-best-hint = Nous choisissons pour vous des places voisines dans le meilleur rang.
storefront-best-seats = Places
storefront-best-section = Section
storefront-best-seating = Placement
storefront-best-left-title = Le plus de places encore côte à côte
storefront-left-none = Section { $section } : plus aucune
storefront-left-seats =
    { $count ->
        [one] Section { $section } : une place
       *[other] Section { $section } : { $count } places
    }
storefront-tier-option-left = { $tier } · { $price } · { $count } restantes
storefront-tier-option = { $tier } · { $price }
storefront-tier-title = Places debout
storefront-tier-area = Zone
storefront-tier-tickets = Billets
storefront-tier-hold = Réserver des billets
storefront-hold-seats-count =
    { $count ->
        [one] Réserver une place
       *[other] Réserver { $count } places
    }
storefront-hold-seats = Réserver des places
storefront-selection-title = Votre sélection
storefront-selection-empty = Choisissez jusqu'à { $count } places sur le plan, ou laissez-nous trouver les meilleures disponibles.
storefront-selection-tiers = Choisissez vos billets ci-dessous.
storefront-selection-remove = Retirer { $seat }
storefront-total = Total
storefront-selection-clear = Effacer la sélection
storefront-announce-held =
    { $count ->
        [one] Un billet est réservé pour vous. Payez avant la fin du compte à rebours.
       *[other] { $count } billets sont réservés pour vous. Payez avant la fin du compte à rebours.
    }
storefront-hold-split = Il ne restait pas { $count } places côte à côte : nous avons réparti votre groupe aussi près que la salle le permet.
storefront-announce-one-minute = Plus qu'une minute pour payer vos places.
storefront-hold-expired = Votre réservation a expiré et les places sont de nouveau en vente. Vous pouvez choisir à nouveau.
storefront-announce-hold-expired = Votre réservation a expiré.
storefront-tier-quantity = { $count } × { $tier }
storefront-pay-test-card = Payer avec une carte de test
storefront-pay = Payer { $amount }
storefront-release = Libérer les places
storefront-held-title = Places réservées pour vous
storefront-time-left = Temps restant pour payer
storefront-holder-unit = Billet { $unit } · { $tier }
storefront-holder-name = Nom du titulaire
storefront-holder-name-optional = Nom du titulaire (facultatif)
storefront-holders-title = Titulaires des billets
storefront-holders-hint-required = Le nom de la personne qui utilise chaque billet y est imprimé et vérifié à l'entrée.
storefront-holders-hint-optional = Ajoutez si vous le souhaitez le nom de la personne qui utilise chaque billet : il est imprimé sur le billet.
storefront-released = Vos places ont été libérées.
storefront-holders-saving = Enregistrement des titulaires…
storefront-pay-contacting-slow = Contact avec votre banque (celle-ci est lente)…
storefront-pay-contacting = Contact avec votre banque…
storefront-announce-paid = Paiement confirmé. Voici vos billets.
storefront-pay-declined = Votre paiement n'a pas été accepté, les places sont donc de nouveau en vente. Réessayez avec une autre carte.
storefront-pay-cancelled = La commande a été annulée et les places sont de nouveau en vente.
storefront-pay-waiting-bank = En attente de la confirmation de votre banque…
storefront-pay-bank-waiting = Votre banque attend votre confirmation.
storefront-pay-open-confirmation = Ouvrir la confirmation
storefront-pay-checking = Vérification du paiement…
storefront-pay-confirming = Confirmation de votre paiement…
storefront-pay-still-checking = { $error } Vérification en cours…
storefront-seat-label = Section { $section } · Rang { $row } · Place { $seat }
storefront-bank-unreachable = Impossible de joindre votre banque. Réessayez.
storefront-map-load-failed = Impossible de charger le plan de salle ({ $error }). Nouvel essai…
storefront-map-reconnecting = Reconnexion…
storefront-map-polling = Mise à jour toutes les quelques secondes
storefront-map-status-live = ● En direct · { $available } places libres sur { $count }
storefront-map-status-updating = Mise à jour · { $available } places libres sur { $count }
storefront-map-locked = Payez ou libérez les places réservées avant d'en choisir d'autres.
storefront-announce-seat-removed =
    { $count ->
        [0] { $seat } retirée. Aucune place choisie.
        [one] { $seat } retirée. Une place choisie.
       *[other] { $seat } retirée. { $count } places choisies.
    }
storefront-seat-is-sold = { $seat } est vendue.
storefront-seat-is-held = { $seat } est réservée par quelqu'un d'autre.
storefront-selection-max = Vous pouvez choisir jusqu'à { $count } places à la fois.
storefront-announce-seat-selected =
    { $count ->
        [one] { $seat } choisie, { $price }. Une place choisie.
       *[other] { $seat } choisie, { $price }. { $count } places choisies.
    }
storefront-announce-selection-cleared = Sélection effacée.
storefront-cursor-map = Plan de salle.
storefront-cursor-section = Section { $section }.
storefront-seat-state-mine = réservée pour vous
storefront-seat-state-selected = choisie
storefront-seat-state-sold = vendue
storefront-seat-state-held = réservée
storefront-seat-state-available = libre
storefront-announce-cursor = { $seat }, { $price }, { $state }.
storefront-map-stage = SCÈNE
storefront-ticket-live-code = Code en direct : change dans { $seconds } s
storefront-order-title = Votre commande
storefront-back-to-orders = ← Mes commandes
storefront-sign-in-for-order = Connectez-vous pour voir votre commande et vos billets.
storefront-order-loading = Chargement de votre commande…
storefront-order-tickets = Vos billets
storefront-order-not-found = Commande introuvable
storefront-retrying = { $error } Nouvel essai…
storefront-back-to-map = Retour au plan de salle
storefront-all-events = Tous les événements
storefront-order-confirmed = Votre commande est confirmée
storefront-order-pending = En attente de votre paiement
storefront-order-cancelled = Votre commande a été annulée
storefront-order-refunded = Votre commande a été remboursée
storefront-order-event = Événement
storefront-order-order = Commande
storefront-order-status = État
storefront-order-payment = Paiement
storefront-order-seats = Places
storefront-order-tickets-count = Billets
storefront-order-refunds = Remboursements
storefront-refund-line = { $amount } { $status }
storefront-refund-line-failed = { $amount } { $status } ({ $failure } : nous vous devons encore cette somme ; contactez l'organisateur)
storefront-order-payment-failed = Le paiement n'a pas abouti : aucun billet n'a été émis et les places sont de nouveau en vente.
storefront-order-bank-confirm = Votre banque vous demande de confirmer ce paiement.
storefront-order-bank-button = Confirmer auprès de votre banque
storefront-order-confirming = Nous confirmons votre paiement auprès de la banque…
storefront-order-show-qr = Présentez les codes QR à l'entrée. Chaque code fonctionne une fois.
storefront-order-issuing = Paiement confirmé. Vos billets sont en cours d'émission…
storefront-ticket-qr-label = Code QR du billet pour { $ticket }
storefront-ticket-qr-loading = Chargement du code QR…
storefront-ticket = Billet
storefront-ticket-standing = Debout
storefront-ticket-qr-unavailable = Code QR indisponible ; présentez le code ci-dessous.
storefront-status-confirmed = confirmée
storefront-status-pending-payment = paiement en attente
storefront-status-cancelled = annulée
storefront-status-refunded = remboursée
storefront-payment-requires-action = action requise
storefront-payment-authorized = autorisé
storefront-payment-captured = encaissé
storefront-payment-failed = échoué
storefront-payment-voided = annulé
storefront-payment-unknown = en vérification
storefront-refund-pending = en attente
storefront-refund-succeeded = effectué
storefront-refund-failed = échoué
storefront-ticket-refunded = Remboursé : n'est plus valable.
storefront-ticket-event-cancelled = L'événement a été annulé : ce billet n'est plus valable et votre argent vous est rendu.
storefront-ticket-voided = N'est plus valable : donné à quelqu'un d'autre ou échangé.
storefront-ticket-checked-in = Utilisé à l'entrée.
storefront-ticket-exchanging = En cours d'échange.
storefront-pdf-save = Enregistrer le PDF
storefront-pdf-tickets = Billets PDF
storefront-pdf-preparing = Préparation du PDF…
storefront-wallet-none = Les cartes Wallet ne sont pas disponibles pour cet événement.
storefront-wallet-no-apple = Les cartes Apple Wallet ne sont pas disponibles pour cet événement.
storefront-wallet-no-google = Les cartes Google Wallet ne sont pas disponibles pour cet événement.
storefront-wallet-apple-save = Enregistrer la carte
storefront-wallet-google-open = Ouvrir Google Wallet
storefront-wallet-apple = Apple Wallet
storefront-wallet-google = Google Wallet
storefront-wallet-preparing = Préparation de la carte…
storefront-wallet-bad-link = Le lien Wallet n'est pas une adresse web.
storefront-ticket-holder = Titulaire : { $name }
storefront-ticket-no-holder = Aucun titulaire indiqué pour l'instant.
storefront-holder-change-submit = Enregistrer le titulaire
storefront-holder-change-saving = Enregistrement…
storefront-holder-changed = { $name } utilisera désormais ce billet ; il reste dans votre compte.
storefront-holder-change = Changer de titulaire
storefront-holder-add = Indiquer le titulaire
storefront-refund-submit = Rembourser ce billet
storefront-refund-asking = Demande de remboursement…
storefront-refund-requested = Remboursement de { $amount } demandé : ce billet n'est plus valable, et l'argent revient sur votre carte.
storefront-refund = Remboursement
storefront-refund-hint-fee = Le prix du billet vous est rendu, moins des frais de { $fee }.
storefront-refund-hint = Le prix du billet vous est rendu.
storefront-give-label = Donner ce billet à (nom de compte)
storefront-give-submit = Proposer
storefront-give-offering = Proposition en cours…
storefront-give-offered = Proposé à { $account }. Le billet reste à vous jusqu'à son acceptation.
storefront-give = Donner à quelqu'un
storefront-payment-authorizing = autorisation en cours
storefront-transfers-title = Transferts
storefront-sign-in-for-transfers = Connectez-vous pour voir les billets qui vous sont proposés.
storefront-transfers-received = Proposés à vous
storefront-transfers-given = Proposés par vous
storefront-transfers-offered = Proposé le
storefront-transfers-from-to = De / à
storefront-transfers-tickets = Billets
storefront-transfers-status = État
storefront-transfers-your-tickets = Vos billets
storefront-transfers-accepted = Accepté. Les billets sont à vous.
storefront-transfers-declined = Proposition refusée.
storefront-transfers-withdrawn = Proposition retirée.
storefront-transfers-accept = Accepter
storefront-transfers-decline = Refuser
storefront-transfers-none-received = Personne ne vous a proposé de billets.
storefront-transfers-withdraw = Retirer
storefront-transfers-none-given = Vous n'avez proposé de billets à personne. Ouvrez une commande pour donner un billet.
storefront-transfer-status-offered = proposé
storefront-transfer-status-accepted = accepté
storefront-transfer-status-declined = refusé
storefront-transfer-status-withdrawn = retiré
storefront-transfer-status-expired = expiré
storefront-transfer-status-cancelled = annulé
storefront-waitlist-title = Liste d'attente
storefront-back-to-event = ← Retour à l'événement
storefront-sign-in-for-waitlist = Connectez-vous pour rejoindre la liste d'attente.
storefront-waitlist-explain = { $event } est complet. Dites-nous de combien de places votre groupe a besoin : quand assez de places reviennent, nous les réservons pour vous pendant { $duration }, toutes ou aucune, dans l'ordre d'inscription.
storefront-waitlist-seats = Places
storefront-waitlist-together = Places ensemble dans un rang
storefront-waitlist-waiting =
    { $count ->
        [one] Vous êtes numéro { $position } sur la liste d'attente pour une place.
       *[other] Vous êtes numéro { $position } sur la liste d'attente pour { $count } places.
    }
storefront-waitlist-offered = Des places sont revenues pour vous ! Elles sont réservées jusqu'au { $until }.
storefront-waitlist-purchased = Vous avez acheté vos places. Bon spectacle !
storefront-waitlist-lapsed = Votre offre a expiré et les places sont allées au groupe suivant. Vous pouvez vous réinscrire.
storefront-waitlist-left = Vous avez quitté la liste d'attente.
storefront-waitlist-pay = Payer avec la carte de test
storefront-waitlist-leave = Quitter la liste d'attente
storefront-waitlist-joined = Vous avez rejoint la liste d'attente.
storefront-orders-title = Mes commandes
storefront-sign-in-for-orders = Connectez-vous pour voir vos commandes.
storefront-orders-none = Aucune commande pour l'instant.
storefront-orders-find-event = Trouver un événement
storefront-orders-placed = Passée le
storefront-language = Langue
storefront-title = boxoffice — billets
storefront-skip-link = Aller au contenu
storefront-brand-label = boxoffice, tous les événements
storefront-nav-label = Principal
storefront-nav-events = Événements
storefront-nav-orders = Mes commandes
storefront-nav-transfers = Transferts
storefront-signin-demo-hint = Ce serveur de démonstration vous laisse choisir n'importe quel nom de compte.
storefront-signin-account = Nom de compte
storefront-signin-account-hint = Lettres, chiffres, point, tiret ou tiret bas.
storefront-signin-token-instead = Utiliser plutôt un jeton
storefront-signin-token = Jeton d'accès (JWT)
storefront-signin-token-use = Utiliser ce jeton
storefront-3ds-title = Votre banque vous demande de confirmer
storefront-3ds-hint = Vérification 3-D Secure simulée
storefront-3ds-question = Approuver ce paiement à boxoffice ?
storefront-3ds-confirm = Confirmer le paiement
storefront-3ds-fail = Faire échouer l'authentification

## Phases de vente et codes d'accès
storefront-phases-title = Phases de vente
storefront-phase-window = du { $from } au { $to }
storefront-phase-from = à partir du { $from }
storefront-phase-open = en cours
storefront-phase-later = pas encore ouverte
storefront-phase-ended = terminée
storefront-phase-code-badge = Code d'accès
storefront-phase-code-label = Votre code d'accès
storefront-phase-code-submit = Débloquer la prévente
storefront-phase-unlocked = Débloqué : vous pouvez acheter dans { $phase }.
storefront-error-access-code-required = Cette prévente est réservée aux détenteurs d'un code d'accès : saisissez votre code ci-dessus.
storefront-error-access-code-invalid = Ce code n'est pas valable pour cette prévente.
storefront-error-access-code-used-up = Ce code a déjà été utilisé.
storefront-error-outside-phase = Ces places ne sont pas en vente dans cette phase.
storefront-error-phase-ended = Cette phase de vente est terminée.

## Ticket types, all-in prices and promo codes (issue 40)
storefront-types-title = Billets par tarif
storefront-types-hint = Combien de chaque tarif ; laissez tout à 0 pour des billets standard. Les tarifs vont à vos places dans l’ordre.
storefront-type-standard = Standard
storefront-breakdown-face = Valeur faciale
storefront-breakdown-discount = Réduction
storefront-breakdown-fees = Frais
storefront-breakdown-order-fees = Frais de commande
storefront-breakdown-tax-included = Taxes incluses
storefront-breakdown-tax-added = Taxes ajoutées
storefront-promo-label = Code promo
