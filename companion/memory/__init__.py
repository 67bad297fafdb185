"""Layer 2, memory: the stores (sqlite-vec, the selective store, DynamoDB, AgentCore), user scoping, the write policy,
pruning and the SDK's context managers. Imports from `support` and `models`, never from `sessions` or `measure`."""
