"""Operations built on the client: rolling upgrade, configuration rollout, bulk, pipeline."""
