"""The API server: requests, and the views the watches keep."""
