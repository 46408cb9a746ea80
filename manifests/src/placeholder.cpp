// replaced by the manifest parser
