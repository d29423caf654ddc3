"""The built-in profiles, as TOML data files beside this one (a package only so they install)."""
