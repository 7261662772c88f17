// Fixture: a private header re-added beside its public one.
#pragma once
