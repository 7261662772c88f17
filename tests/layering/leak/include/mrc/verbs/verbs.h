// Fixture: the public verbs API.
#pragma once
