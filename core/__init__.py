"""The ground floor every app may use: errors, crypto, secret rules, the tenant-scoped API base, the outbound guard."""
