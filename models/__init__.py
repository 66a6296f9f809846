"""SQL access, grouped by entity. Every function takes the connection first and never commits."""
