"""The built-in profiles: what each agent may do, as TOML (a package only so they install)."""
