"""A plug-in installed from outside fabriclab, for the tests: found through its entry points
(``fabriclab_testplugin-0.1.dist-info/entry_points.txt``) once this folder is on the path."""
