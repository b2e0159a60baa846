"""Azure region short names and the display names the real service answered with."""

from __future__ import annotations

_DISPLAY_NAMES = [
    "East US",
    "East US 2",
    "Central US",
    "North Central US",
    "South Central US",
    "West Central US",
    "West US",
    "West US 2",
    "West US 3",
    "Canada Central",
    "Canada East",
    "Brazil South",
    "Brazil Southeast",
    "Mexico Central",
    "North Europe",
    "West Europe",
    "UK South",
    "UK West",
    "France Central",
    "France South",
    "Germany West Central",
    "Germany North",
    "Switzerland North",
    "Switzerland West",
    "Norway East",
    "Norway West",
    "Sweden Central",
    "Poland Central",
    "Italy North",
    "Spain Central",
    "East Asia",
    "Southeast Asia",
    "Japan East",
    "Japan West",
    "Korea Central",
    "Korea South",
    "Central India",
    "South India",
    "West India",
    "Jio India West",
    "Australia East",
    "Australia Southeast",
    "Australia Central",
    "Australia Central 2",
    "South Africa North",
    "South Africa West",
    "UAE North",
    "UAE Central",
    "Qatar Central",
    "Israel Central",
    "China East",
    "China North",
    "China East 2",
    "China North 2",
    "US Gov Virginia",
    "US Gov Iowa",
    "US Gov Arizona",
    "US Gov Texas",
    "Germany Central",
    "Germany Northeast",
]
_BY_KEY = {name.replace(" ", "").lower(): name for name in _DISPLAY_NAMES}


def display_location(location: str) -> str:
    """``westus`` (or ``West US``, ``WESTUS``) → ``West US``; an unknown location is kept as sent."""
    return _BY_KEY.get(location.replace(" ", "").lower(), location)


def known_display_names() -> tuple[str, ...]:
    """Every region this module knows, by display name."""
    return tuple(_DISPLAY_NAMES)
