# Labels the container tests that the sanitizer run skips (plain_only, tests/CMakeLists.txt), whose
# names the discovery left in plain_only_tests.
foreach(test IN LISTS plain_only_tests)
  set_tests_properties("${test}" PROPERTIES LABELS "root;plain_only")
endforeach()
