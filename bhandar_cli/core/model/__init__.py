"""The data model every role shares: records, versions, values, configuration, limits,
errors, the store interface and the metrics a node keeps."""
