"""The daily pipeline: signals -> forecasts -> planning problem -> plan document."""
