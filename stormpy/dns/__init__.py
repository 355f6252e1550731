"""The DNS application: zone files (zone), the compiler that prepackages every answer
(compiler), and serve-dns (server)."""
