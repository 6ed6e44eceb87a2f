"""Providers: one module per wire format (see ``base.Provider``)."""
