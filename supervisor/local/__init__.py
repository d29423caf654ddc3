"""The local model: a small coding model served by llama.cpp on 127.0.0.1, for users
without an API key (and for `make demo`)."""
