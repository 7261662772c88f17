// Fixture: the internal state (check_public.cmake).
#pragma once
