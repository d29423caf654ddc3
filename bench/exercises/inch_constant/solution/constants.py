"""Conversion factors between units of length."""

CM_PER_INCH = 2.54
CM_PER_FOOT = 30.48
M_PER_MILE = 1609.344
