"""The performance history: every result CSV kept in a database (SQLite, one file; PostgreSQL to come), one
series per (model, device_name, seq_len, batch, gen_tokens, phase, metric), ordered by commit. `history.py`
(and `yoco history`) is its command line."""
