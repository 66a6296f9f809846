"""Pure code, no database and no server: the settings table and its rules, the free-time engine, the
webhook signer, the delivery loop's wake-up pipe."""
