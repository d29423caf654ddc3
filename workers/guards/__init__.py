"""What holds an agent to the work: read before edit, no going round in circles, answers checked against evidence, test runs recognised, the context window kept."""
