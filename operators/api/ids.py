"""Frozen identifiers of pools and devices: the coordinates used in messages, logs and maps."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class PoolID:
    """A resource pool is identified by its driver and pool name; prints as ``driver/pool``."""

    driver: str
    pool: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}"

    def device(self, name: str) -> DeviceID:
        """The ID of a device in this pool."""
        return DeviceID(self.driver, self.pool, name)


@dataclass(frozen=True, slots=True, order=True)
class DeviceID:
    """A device is unique by (driver, pool, device); prints as ``driver/pool/device``.

    Pool names may contain slashes, so parsing a printed ID takes the driver from the first
    segment and the device from the last one, and keeps the middle as the pool.
    """

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"

    @property
    def pool_id(self) -> PoolID:
        return PoolID(self.driver, self.pool)

    @classmethod
    def parse(cls, text: str) -> DeviceID:
        """Inverse of ``str()``; raises ValueError for fewer than three segments."""
        driver, sep, rest = text.partition("/")
        pool, sep2, device = rest.rpartition("/")
        if not (sep and sep2 and driver and pool and device):
            raise ValueError(f"device ID {text!r}: expected driver/pool/device")
        return cls(driver, pool, device)
