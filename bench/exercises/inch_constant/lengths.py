"""Lengths from imperial units to metric ones."""

from constants import CM_PER_FOOT, CM_PER_INCH, M_PER_MILE


def inches_to_cm(inches: float) -> float:
    return inches * CM_PER_INCH


def feet_to_cm(feet: float) -> float:
    return feet * CM_PER_FOOT


def miles_to_km(miles: float) -> float:
    return miles * M_PER_MILE / 1000
