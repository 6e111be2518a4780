"""The ResourceClaimTemplate controller (KEP-4381): one claim per pod template entry."""
