"""Who may do what: the cluster CA and certificates, tokens and auth, join tokens, the data
key, rate limits, the peer gate."""
