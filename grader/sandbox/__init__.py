"""The trust boundary's mechanics: confinement of a worker, its channel and what crosses it."""
