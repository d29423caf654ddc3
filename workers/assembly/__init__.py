"""Agents built from profiles: profiles read and resolved into specs, and every agent put together from a spec in one place."""
