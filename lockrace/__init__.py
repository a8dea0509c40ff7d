"""lockrace: a terminal lock-race simulator for PostgreSQL and MariaDB/MySQL."""

__version__ = "0.1.0"
