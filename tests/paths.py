"""Where things are, for every test: the repository and the collection link to it."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".build", "collections")  # prepared by tests/conftest.py
