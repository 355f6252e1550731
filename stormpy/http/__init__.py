"""serve-http: static sites compiled into prepackaged HTTP answers (Sandstorm)."""
