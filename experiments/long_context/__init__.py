"""The long-context study (results/long_context/): its plan, the engine validation, the report and its analysis."""
