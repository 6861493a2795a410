"""carbonsched package."""
