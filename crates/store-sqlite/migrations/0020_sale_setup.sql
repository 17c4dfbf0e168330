-- Selling the way organisers sell (issue 40): an event's ticket types, fees and tax, phases
-- and allocations as created, one JSON document (`boxoffice_domain::sale::SaleSetup`); '{}'
-- sells as before (one price per section or tier, no fees, one general sale).
ALTER TABLE event ADD COLUMN sale_setup text NOT NULL DEFAULT '{}';
