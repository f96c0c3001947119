"""Analyses over dhir programs: what tasks read and write, and what orders them."""
