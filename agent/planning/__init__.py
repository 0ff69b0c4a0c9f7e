"""Planning: a pure function from forecasts, pool states, budgets and prices to a CapacityPlan."""
